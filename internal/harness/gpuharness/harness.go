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
package gpuharness

import (
	"errors"
	"fmt"
	"time"

	"github.com/ncclhooks/ncclhooks/internal/abi"
	"github.com/ncclhooks/ncclhooks/internal/cuda"
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
	dev   *cuda.Device
	cache *cuda.Cache
	mod   *cuda.Module
	// Image is how the harness module was built (compile time, cache hit).
	Image *cuda.Image

	harness, fill, hookCost *cuda.Function
}

// New compiles the harness kernels for dev (through cache, which may be nil)
// and loads them.
func New(dev *cuda.Device, cache *cuda.Cache) (*Harness, error) {
	// ptxas -v: the kernels' register counts are in Image.Log. A hook called
	// through a pointer must fit in what its caller was given.
	img, err := dev.Compile(kernelSource, cuda.CompileOptions{Name: "ncclhooks_harness.cu", Cache: cache,
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
		fn   **cuda.Function
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
func Run(dev *cuda.Device, hook uint64, ctxs []uint64, cfg Config) (*Result, error) {
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
