package harness

import (
	"fmt"
	"sync"
	"time"

	"github.com/ncclhooks/ncclhooks/internal/cuda"
	"github.com/ncclhooks/ncclhooks/internal/harness/gpuharness"
)

// emitGPU runs the ncclKernelMain-like kernel of package harness/gpu on every
// device at once, each with its communicators on concurrent streams, calling
// the hook getDeviceHook returned for that device.
func emitGPU(comms []*comm, devices int, cfg Config, stride uint64) (map[int][]Event, map[int]uint64, time.Duration, error) {
	lib, err := cuda.Open()
	if err != nil {
		return nil, nil, 0, err
	}
	gcfg := gpuharness.Config{
		Comms:         cfg.CommsPerDevice,
		Channels:      cfg.Channels,
		Launches:      1,
		Batches:       max(cfg.Items/cfg.Batch, 1),
		ItemsPerBatch: cfg.Batch,
		BytesPerItem:  cfg.BytesPerItem,
		FuncIDs:       cfg.FuncIDs,
		Graph:         cfg.Graph,
		Replays:       cfg.Replays,
		LogEvents:     cfg.Verify,
		CounterStride: stride, // communicator k starts at firstCounter(k, stride)
		EventRate:     cfg.EventRate,
	}
	if cfg.MidRun != nil {
		// Called once, by device 0's run, however many devices play.
		var once sync.Once
		var midErr error
		mid := cfg.MidRun
		gcfg.MidRun = func() error { once.Do(func() { midErr = mid() }); return midErr }
	}
	type out struct {
		res *gpuharness.Result
		err error
	}
	// Each device's communicators, in order: their hook and their contexts.
	hooks := make([]uint64, devices)
	ctxs := make([][]uint64, devices)
	for _, c := range comms {
		if c.hook != 0 {
			hooks[c.Device] = uint64(c.hook)
		}
		ctxs[c.Device] = append(ctxs[c.Device], uint64(c.ctx))
	}
	outs := make([]out, devices)
	var wg sync.WaitGroup
	t0 := time.Now()
	for d := range devices {
		wg.Add(1)
		go func(d int) {
			defer wg.Done()
			dev, err := lib.Device(d)
			if err != nil {
				outs[d].err = err
				return
			}
			defer dev.Close()
			outs[d].res, outs[d].err = gpuharness.Run(dev, hooks[d], ctxs[d], gcfg)
		}(d)
	}
	wg.Wait()
	elapsed := time.Since(t0)
	logs := map[int][]Event{}
	emitted := map[int]uint64{}
	var kernels time.Duration // the devices' kernels ran at once: the longest
	for d, o := range outs {
		if o.err != nil {
			return nil, nil, 0, fmt.Errorf("device %d: %w", d, o.err)
		}
		kernels = max(kernels, time.Duration(float64(o.res.KernelMs)*1e6))
		emitted[d] = o.res.Emitted()
		if !cfg.Verify {
			continue
		}
		for k, evs := range o.res.Events {
			for _, e := range evs {
				logs[d] = append(logs[d], Event{e, k})
			}
		}
	}
	if kernels > 0 {
		elapsed = kernels // the rate over the kernels' own time, not compilation and setup
	}
	return logs, emitted, elapsed, nil
}
