// Package gpu is the GPU half of the NCCL-contract harness: it plays NCCL's
// part on a real GPU for a device hook, the way NCCL with the device profiler
// hook (NCCL pull request 2285) would. Its kernel, compiled by NVRTC at run
// time, is modelled on ncclKernelMain (one block per channel, batches of work
// items, thread 0 calling the hook at START and STOP around real data
// movement); several communicators run concurrently on their own streams with
// the same channel ids, optionally captured in CUDA graphs and replayed.
// It also owns the hook benchmarks: per-call cost against a nop hook compiled
// in the same run, and event throughput.
//
// It lives under harness/ because it plays NCCL, which no other package does;
// it is a package of its own because only it needs a GPU.
package gpu

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/ncclhooks/ncclhooks/abi"
	"github.com/ncclhooks/ncclhooks/nvrtc"
)

// Event is one event the hook was given, as logged by the kernel.
type Event = abi.DevEvent

// channelStateBytes is sizeof(ChannelState) in kernelSource.
const channelStateBytes = 16

// Result is what one Run did, counted on the device.
type Result struct {
	Config Config
	Hook   string
	// ItemsPerComm and EmittedPerComm are the work items run and the events
	// passed to the hook, per communicator, as the kernels counted them.
	ItemsPerComm   []uint64
	EmittedPerComm []uint64
	// Events holds, per communicator, every event passed to the hook, by
	// channel and then in call order (LogEvents only).
	Events [][]Event
	// Elapsed is the host's wall time from the first launch to the end of
	// the last kernel; KernelMs the GPU's, from the first communicator's
	// start to the last one's end.
	Elapsed  time.Duration
	KernelMs float32
}

// Emitted is the number of events passed to the hook on the device.
func (r *Result) Emitted() uint64 {
	var n uint64
	for _, e := range r.EmittedPerComm {
		n += e
	}
	return n
}

// EventsPerSec is the device's event rate over the kernels' GPU time.
func (r *Result) EventsPerSec() float64 {
	if r.KernelMs <= 0 {
		return 0
	}
	return float64(r.Emitted()) / (float64(r.KernelMs) / 1e3)
}

// Harness holds the harness kernels loaded on one device.
type Harness struct {
	dev   *nvrtc.Device
	cache *nvrtc.Cache
	mod   *nvrtc.Module
	// Image is how the harness module was built (compile time, cache hit).
	Image *nvrtc.Image

	harness, fill, hookCost *nvrtc.Function
}

// New compiles the harness kernels for dev (through cache, which may be nil)
// and loads them.
func New(dev *nvrtc.Device, cache *nvrtc.Cache) (*Harness, error) {
	// ptxas -v: the kernels' register counts are in Image.Log. A hook called
	// through a pointer must fit in what its caller was given.
	img, err := dev.Compile(kernelSource, nvrtc.CompileOptions{Name: "ncclhooks_harness.cu", Cache: cache,
		Options: []string{"--ptxas-options=-v"}})
	if err != nil {
		return nil, fmt.Errorf("compiling the harness kernel: %w", err)
	}
	mod, err := dev.Load(img)
	if err != nil {
		return nil, fmt.Errorf("loading the harness kernel: %w", err)
	}
	h := &Harness{dev: dev, cache: cache, mod: mod, Image: img}
	for _, f := range []struct {
		fn   **nvrtc.Function
		name string
	}{{&h.harness, kernelHarness}, {&h.fill, kernelFill}, {&h.hookCost, kernelHookCost}} {
		if *f.fn, err = mod.Function(f.name); err != nil {
			return nil, errors.Join(fmt.Errorf("harness kernel %s: %w", f.name, err), mod.Unload())
		}
	}
	return h, nil
}

// Close unloads the harness kernels.
func (h *Harness) Close() error { return h.mod.Unload() }

// Run loads the harness on dev, runs cfg against hook (entry address and
// devCtx as getDeviceHook returned them; entry 0 means no hook) and unloads.
// ctxs are the communicators' contexts: communicator i passes ctxs[i].
func Run(dev *nvrtc.Device, hook uint64, ctxs []uint64, cfg Config) (*Result, error) {
	h, err := New(dev, nil)
	if err != nil {
		return nil, err
	}
	hk := Hook{Name: "hook", Entry: hook, CommCtx: ctxs}
	if len(ctxs) > 0 {
		hk.Ctx = ctxs[0]
	}
	res, err := h.Run(hk, cfg)
	return res, errors.Join(err, h.Close())
}

// Run plays cfg against hook and checks that the kernels ran every work item
// and really moved the data. The hook must stay loaded until Run returns.
func (h *Harness) Run(hook Hook, cfg Config) (_ *Result, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if blocks := cfg.Comms * cfg.Channels; blocks > maxBlocksPerSM*h.dev.SMs {
		return nil, fmt.Errorf("harness: Comms x Channels = %d blocks exceeds %d (%d per multiprocessor on %s): the communicators could not all run at once; lower Comms or Channels",
			blocks, maxBlocksPerSM*h.dev.SMs, maxBlocksPerSM, h.dev.Name)
	}
	r := &run{h: h, cfg: cfg, hook: hook}
	defer func() { err = errors.Join(err, r.release()) }()
	if err := r.setup(); err != nil {
		return nil, err
	}
	res, err := r.play()
	if err != nil {
		return nil, err
	}
	res.Hook = hook.Name
	if err := r.collect(res); err != nil {
		return nil, err
	}
	return res, nil
}

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
	stream     *nvrtc.Stream
	src, dst   uint64 // Channels*ItemsPerBatch regions of BytesPerItem
	state      uint64 // Channels ChannelState
	log        uint64 // Channels*logCap events, or 0
	start, end *nvrtc.Event
	graph      *nvrtc.Graph
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
		for _, e := range []**nvrtc.Event{&c.start, &c.end} {
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
		if base := uint64(i) * cfg.CounterStride; base != 0 {
			st := make([]byte, cfg.Channels*channelStateBytes)
			for ch := range cfg.Channels {
				binary.LittleEndian.PutUint64(st[ch*channelStateBytes:], base)
			}
			if err := dev.CopyHtoD(c.state, st, c.stream); err != nil {
				return fmt.Errorf("harness: setting communicator %d's counters: %w", i, err)
			}
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
		s, err := nvrtc.ElapsedMs(r.comms[0].start, c.start)
		if err != nil {
			return nil, fmt.Errorf("harness: timing communicator %d: %w", i, err)
		}
		e, err := nvrtc.ElapsedMs(r.comms[0].start, c.end)
		if err != nil {
			return nil, fmt.Errorf("harness: timing communicator %d: %w", i, err)
		}
		first, last = min(first, s), max(last, e)
	}
	res.KernelMs = last - first
	return res, nil
}

// collect reads the device counters (and the log) back and checks them
// against the configuration and the data against the source pattern.
func (r *run) collect(res *Result) error {
	cfg, dev := &r.cfg, r.h.dev
	state := make([]byte, cfg.Channels*channelStateBytes)
	for i, c := range r.comms {
		if err := dev.CopyDtoH(state, c.state, c.stream); err != nil {
			return fmt.Errorf("harness: reading communicator %d's counters: %w", i, err)
		}
		var items, emitted uint64
		perChannel := make([]uint64, cfg.Channels)
		for ch := range cfg.Channels {
			it := binary.LittleEndian.Uint64(state[ch*channelStateBytes:]) - uint64(i)*cfg.CounterStride
			perChannel[ch] = binary.LittleEndian.Uint64(state[ch*channelStateBytes+8:])
			if want := cfg.ItemsPerComm() / uint64(cfg.Channels); it != want {
				return fmt.Errorf("harness: communicator %d channel %d ran %d work items, want %d", i, ch, it, want)
			}
			items += it
			emitted += perChannel[ch]
		}
		res.ItemsPerComm = append(res.ItemsPerComm, items)
		res.EmittedPerComm = append(res.EmittedPerComm, emitted)
		if err := r.verifyData(i); err != nil {
			return err
		}
		if c.log != 0 {
			evs, err := r.readLog(i, perChannel)
			if err != nil {
				return err
			}
			res.Events = append(res.Events, evs)
		}
	}
	return nil
}

// verifyData checks the first and the last item region of communicator i:
// each must hold the source summed once per execution of its item.
func (r *run) verifyData(i int) error {
	cfg, c := &r.cfg, r.comms[i]
	n := cfg.executionsPerItem()
	buf := make([]byte, cfg.BytesPerItem)
	regions := cfg.Channels * cfg.ItemsPerBatch
	for _, region := range []int{0, regions - 1} {
		off := region * cfg.BytesPerItem
		if err := r.h.dev.CopyDtoH(buf, c.dst+uint64(off), c.stream); err != nil {
			return fmt.Errorf("harness: reading communicator %d's destination: %w", i, err)
		}
		for w := 0; w < len(buf)/4; w++ {
			word := uint64(off/4 + w)
			got := binary.LittleEndian.Uint32(buf[4*w:])
			if want := n * fillPattern(word, fillSeed(i)); got != want {
				return fmt.Errorf("harness: communicator %d: destination word %d = %#x, want %#x (%d reductions of %#x): the kernel did not do its work",
					i, word, got, want, n, fillPattern(word, fillSeed(i)))
			}
		}
	}
	return nil
}

// readLog decodes communicator i's event log.
func (r *run) readLog(i int, emitted []uint64) ([]Event, error) {
	cfg, c := &r.cfg, r.comms[i]
	capEvents := cfg.logCap()
	buf := make([]byte, uint64(cfg.Channels)*capEvents*abi.DevEventSize)
	if err := r.h.dev.CopyDtoH(buf, c.log, c.stream); err != nil {
		return nil, fmt.Errorf("harness: reading communicator %d's event log: %w", i, err)
	}
	var evs []Event
	for ch, n := range emitted {
		if n > capEvents {
			return nil, fmt.Errorf("harness: communicator %d channel %d emitted %d events, more than the %d expected", i, ch, n, capEvents)
		}
		base := uint64(ch) * capEvents * abi.DevEventSize
		for k := range n {
			evs = append(evs, abi.DecodeDevEvent(buf[base+k*abi.DevEventSize:]))
		}
	}
	return evs, nil
}

// fillSeed makes every communicator's source different.
func fillSeed(comm int) uint32 { return uint32(comm)*0x9e3779b9 + 1 }

// fillPattern is ncclhooks_harness_fill's value for word i.
func fillPattern(i uint64, seed uint32) uint32 { return uint32(i)*2654435761 + seed }
