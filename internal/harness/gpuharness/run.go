package gpuharness

// The device side of one Harness.Run: its buffers, streams and events, the
// launches (or graphs) that play it, and the source pattern they move.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/ncclhooks/ncclhooks/internal/abi"
	"github.com/ncclhooks/ncclhooks/internal/cuda"
)

// run is the device state of one Harness.Run.
type run struct {
	h    *Harness
	cfg  Config
	hook Hook

	funcIDs uint64
	comms   []*comm
	frees   []func() error // in allocation order; released in reverse
}

// comm is one communicator's stream, buffers and timing events.
type comm struct {
	stream     *cuda.Stream
	src, dst   uint64 // Channels*ItemsPerBatch regions of BytesPerItem
	state      uint64 // Channels ChannelState
	log        uint64 // Channels*logCap events, or 0
	start, end *cuda.Event
	graph      *cuda.Graph
}

func (r *run) alloc(n int) (uint64, error) {
	p, err := r.h.dev.Alloc(n)
	if err != nil {
		return 0, fmt.Errorf("harness: allocating %d bytes of device memory: %w", n, err)
	}
	r.frees = append(r.frees, func() error { return r.h.dev.Free(p) })
	return p, nil
}

func (r *run) release() error {
	var errs []error
	for i := len(r.frees) - 1; i >= 0; i-- {
		errs = append(errs, r.frees[i]())
	}
	r.frees = nil
	return errors.Join(errs...)
}

func (r *run) setup() error {
	cfg, dev := &r.cfg, r.h.dev
	ids := make([]byte, 4*len(cfg.FuncIDs))
	for i, id := range cfg.FuncIDs {
		binary.LittleEndian.PutUint32(ids[4*i:], id)
	}
	var err error
	if r.funcIDs, err = r.alloc(len(ids)); err != nil {
		return err
	}
	dataBytes := cfg.Channels * cfg.ItemsPerBatch * cfg.BytesPerItem
	for i := 0; i < cfg.Comms; i++ {
		c := &comm{}
		r.comms = append(r.comms, c)
		if c.stream, err = dev.NewStream(); err != nil {
			return fmt.Errorf("harness: stream for communicator %d: %w", i, err)
		}
		r.frees = append(r.frees, c.stream.Destroy)
		for _, e := range []**cuda.Event{&c.start, &c.end} {
			if *e, err = dev.NewEvent(); err != nil {
				return fmt.Errorf("harness: event for communicator %d: %w", i, err)
			}
			r.frees = append(r.frees, (*e).Destroy)
		}
		if c.src, err = r.alloc(dataBytes); err != nil {
			return err
		}
		if c.dst, err = r.alloc(dataBytes); err != nil {
			return err
		}
		if c.state, err = r.alloc(cfg.Channels * channelStateBytes); err != nil {
			return err
		}
		// Every channel's first work item is FirstCounter (never 0, as in NCCL).
		st := make([]byte, cfg.Channels*channelStateBytes)
		for ch := range cfg.Channels {
			binary.LittleEndian.PutUint64(st[ch*channelStateBytes:], cfg.FirstCounter(i))
		}
		if err := dev.CopyHtoD(c.state, st, c.stream); err != nil {
			return fmt.Errorf("harness: setting communicator %d's counters: %w", i, err)
		}
		if cfg.LogEvents {
			if c.log, err = r.alloc(cfg.Channels * int(cfg.logCap()) * abi.DevEventSize); err != nil {
				return err
			}
		}
		words := uint64(dataBytes / 4)
		grid := uint32(min((words+threadsPerBlock-1)/threadsPerBlock, uint64(8*dev.SMs)))
		if err := dev.Launch(r.h.fill, [3]uint32{grid, 1, 1}, [3]uint32{threadsPerBlock, 1, 1}, 0, c.stream,
			c.src, words, fillSeed(i)); err != nil {
			return fmt.Errorf("harness: filling communicator %d's source: %w", i, err)
		}
	}
	if err := dev.CopyHtoD(r.funcIDs, ids, r.comms[0].stream); err != nil {
		return fmt.Errorf("harness: copying function ids: %w", err)
	}
	for i, c := range r.comms {
		if err := c.stream.Sync(); err != nil {
			return fmt.Errorf("harness: filling communicator %d's source: %w", i, err)
		}
	}
	return nil
}

// launch enqueues launch l of communicator i on its stream.
func (r *run) launch(i, l int) error {
	cfg, c := &r.cfg, r.comms[i]
	var logCap uint64
	if c.log != 0 {
		logCap = cfg.logCap()
	}
	err := r.h.dev.Launch(r.h.harness,
		[3]uint32{uint32(cfg.Channels), 1, 1}, [3]uint32{threadsPerBlock, 1, 1}, 0, c.stream,
		r.hook.Entry, r.hook.ctxOf(i),
		c.src, c.dst, uint64(cfg.BytesPerItem/16),
		int32(cfg.Batches), int32(cfg.ItemsPerBatch),
		r.funcIDs, int32(len(cfg.FuncIDs)), int32(cfg.funcOffset(i, l)),
		c.state, c.log, logCap,
		cfg.batchPeriodNs())
	if err != nil {
		return fmt.Errorf("harness: launching communicator %d: %w", i, err)
	}
	return nil
}

// capture records communicator i's launches into its graph.
func (r *run) capture(i int) error {
	c := r.comms[i]
	if err := c.stream.BeginCapture(); err != nil {
		return fmt.Errorf("harness: capturing communicator %d: %w", i, err)
	}
	var launchErr error
	for l := 0; l < r.cfg.Launches && launchErr == nil; l++ {
		launchErr = r.launch(i, l)
	}
	g, err := c.stream.EndCapture() // always end the capture, even after a failed launch
	if err != nil {
		return errors.Join(launchErr, fmt.Errorf("harness: capturing communicator %d: %w", i, err))
	}
	r.frees = append(r.frees, g.Destroy)
	c.graph = g
	return launchErr
}

// play enqueues every communicator's work, interleaved so that the kernels
// of all communicators overlap, and waits for it.
func (r *run) play() (*Result, error) {
	cfg := &r.cfg
	if cfg.Graph {
		for i := range r.comms {
			if err := r.capture(i); err != nil {
				return nil, err
			}
		}
	}
	t0 := time.Now()
	for i, c := range r.comms {
		if err := c.start.Record(c.stream); err != nil {
			return nil, fmt.Errorf("harness: communicator %d: %w", i, err)
		}
	}
	for rep := 0; rep < cfg.Replays; rep++ {
		if cfg.MidRun != nil && rep == max(cfg.Replays/2, 1) {
			if err := cfg.MidRun(); err != nil {
				return nil, fmt.Errorf("harness: mid-run: %w", err)
			}
		}
		for i, c := range r.comms {
			if cfg.Graph {
				if err := c.graph.Launch(c.stream); err != nil {
					return nil, fmt.Errorf("harness: replaying communicator %d's graph: %w", i, err)
				}
				continue
			}
			for l := 0; l < cfg.Launches; l++ {
				if err := r.launch(i, l); err != nil {
					return nil, err
				}
			}
		}
	}
	for i, c := range r.comms {
		if err := c.end.Record(c.stream); err != nil {
			return nil, fmt.Errorf("harness: communicator %d: %w", i, err)
		}
	}
	for i, c := range r.comms {
		if err := c.end.Sync(); err != nil {
			return nil, fmt.Errorf("harness: communicator %d's kernels failed: %w", i, err)
		}
	}
	res := &Result{Config: *cfg, Elapsed: time.Since(t0)}
	// GPU span: earliest start to latest end, all measured from comm 0's start.
	var first, last float32
	for i, c := range r.comms {
		s, err := cuda.ElapsedMs(r.comms[0].start, c.start)
		if err != nil {
			return nil, fmt.Errorf("harness: timing communicator %d: %w", i, err)
		}
		e, err := cuda.ElapsedMs(r.comms[0].start, c.end)
		if err != nil {
			return nil, fmt.Errorf("harness: timing communicator %d: %w", i, err)
		}
		first, last = min(first, s), max(last, e)
	}
	res.KernelMs = last - first
	return res, nil
}

// fillSeed makes every communicator's source different.
func fillSeed(comm int) uint32 { return uint32(comm)*0x9e3779b9 + 1 }

// fillPattern is ncclhooks_harness_fill's value for word i.
func fillPattern(i uint64, seed uint32) uint32 { return uint32(i)*2654435761 + seed }
