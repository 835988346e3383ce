package sinks

import "sync"

// Gate is a sink that holds every call until Open, then passes it to its
// sink: a live reload's new drainer writes through one, so that its lines
// follow the previous profile epoch's final dump and the profile line
// (JSONL.Epoch). A held call blocks its drainer's deliverer, whose rings
// then fill and count ring_full: records + drops = matched still holds.
type Gate struct {
	s    Sink
	open chan struct{}
	once sync.Once
}

// NewGate returns a closed gate in front of s.
func NewGate(s Sink) *Gate { return &Gate{s: s, open: make(chan struct{})} }

// Open lets the held calls and every later one through.
func (g *Gate) Open() { g.once.Do(func() { close(g.open) }) }

func (g *Gate) Records(recs []Record) error { <-g.open; return g.s.Records(recs) }
func (g *Gate) Dump(d *Dump) error          { <-g.open; return g.s.Dump(d) }

// Close does not close the sink behind the gate: the session closes its
// sinks once, whichever drainer wrote to them last.
func (g *Gate) Close() error { return nil }
