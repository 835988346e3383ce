package sinks

import (
	"slices"
	"sync"
)

// GateHold is how many records a closed Gate keeps before it holds its
// caller: at 1 M events/s, a quarter of a second.
const GateHold = 1 << 18

// Gate is a sink that keeps what it is given until Open, then passes it on
// in order: a live reload's new drainer writes through one, so that its
// lines follow the previous profile epoch's final dump and the profile line
// (JSONL.Epoch) while its hooks already run. It keeps up to GateHold
// records (copied); past that, and for a dump, it holds the drainer's
// deliverer until Open, whose rings then fill and count ring_full:
// records + drops = matched still holds.
type Gate struct {
	s      Sink
	mu     sync.Mutex
	isOpen bool
	held   []Record
	open   chan struct{}
}

// NewGate returns a closed gate in front of s.
func NewGate(s Sink) *Gate { return &Gate{s: s, open: make(chan struct{})} }

// Open passes the records kept so far to the sink, then lets every later
// call through. Only the first call does anything.
func (g *Gate) Open() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.isOpen {
		return nil
	}
	g.isOpen = true
	err := g.flush()
	close(g.open)
	return err
}

// flush writes the kept records (g.mu held).
func (g *Gate) flush() error {
	if len(g.held) == 0 {
		return nil
	}
	err := g.s.Records(g.held)
	g.held = nil
	return err
}

// wait returns with g.mu held and the gate open.
func (g *Gate) wait() {
	<-g.open
	g.mu.Lock()
}

func (g *Gate) Records(recs []Record) error {
	g.mu.Lock()
	if !g.isOpen && len(g.held)+len(recs) <= GateHold {
		for _, r := range recs { // the caller reuses recs and their values
			r.Values = slices.Clone(r.Values)
			g.held = append(g.held, r)
		}
		g.mu.Unlock()
		return nil
	}
	if !g.isOpen {
		g.mu.Unlock()
		g.wait()
	}
	defer g.mu.Unlock()
	return g.s.Records(recs)
}

func (g *Gate) Dump(d *Dump) error {
	g.wait()
	defer g.mu.Unlock()
	return g.s.Dump(d)
}

// Close does not close the sink behind the gate: the session closes its
// sinks once, whichever drainer wrote to them last.
func (g *Gate) Close() error { return nil }
