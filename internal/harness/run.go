package harness

import (
	"fmt"
	"hash/fnv"
	"time"

	"github.com/ncclhooks/ncclhooks/internal/config"
	"github.com/ncclhooks/ncclhooks/internal/harness/gpuharness"
)

// Config is one harness run.
type Config struct {
	Backend        string // "cpu" or "gpu": where the hook runs
	Devices        int    // devices (simulated on cpu)
	CommsPerDevice int    // communicators per device, concurrent, same channel ids
	Channels       int    // channels (threads on cpu, blocks on gpu) per communicator
	Items          int    // work items per channel per launch
	Batch          int    // work items per batch: STARTs, work, STOPs
	WorkFloats     int    // cpu: floats summed per work item
	BytesPerItem   int    // gpu: bytes moved per work item
	Graph          bool   // gpu: capture the launches in a CUDA graph and replay it
	// EventRate (gpu) paces the kernels to about this many events per
	// second on each device (0: as fast as the work goes).
	EventRate float64
	Replays   int // gpu: graph replays (or launches without a graph)
	FuncIDs   []uint32
	OutputDir string // where the plugin writes (NCCL_HOOKS_DUMP_DIR)
	Verify    bool   // keep an event log and check every record against it
	EventsDir string // with Verify: also write the event log there (WriteEventLogs), for ncclhooks check --events
	// Slowdown plants a regression (cpu): each batch's work is stretched by
	// busy waiting to this factor of the time it took, so every work item
	// lasts about Slowdown times as long. 0 or 1: none.
	Slowdown float64
	// Rank and Ranks place this process in a job of Ranks processes, as
	// one process per GPU runs: its devices are ranks Rank*Devices ... of
	// communicators every process shares (same name and commId). 0: a
	// process of its own, each device's communicators its own.
	Rank, Ranks int
	// Barrier is the barrier file the job's ranks share (CreateBarrier):
	// each work item is then a collective between them, whose STOP on
	// every rank comes after the last rank's START. "": none.
	Barrier string
	// A planted straggler (cpu): rank Straggler (in the communicators, 0 to
	// Ranks*Devices-1) starts each batch of its collectives StragglerDelay
	// late. 0: none.
	Straggler      int
	StragglerDelay time.Duration
	// MidRun (cpu) is called once every channel has done HoldAt work items
	// (default Items/2), while they go on emitting a batch a millisecond,
	// at most HoldMax items each (default 8*Items); then the channels do
	// the rest of their items. A live reload test swaps the profile there.
	MidRun          func() error
	HoldAt, HoldMax int
	// Epochs are the profiles a live reload may have made active, besides
	// the one Run is given: each epoch of the output is checked against the
	// one of its hash (none: its accounting alone).
	Epochs []*config.Profile
	// Duration makes the run a soak: cycle after cycle (init every
	// communicator, emit, finalize, as a job that makes and destroys its
	// communicators does) in this one process, with the plugin loaded
	// throughout, until Duration has passed; the check then covers every
	// cycle's dumps. Needs Verify off (the event log would grow with the
	// run, and work counters repeat from one cycle to the next). 0: one
	// cycle.
	Duration time.Duration
	// Gap is the pause between two cycles of a soak: the plugin, with no
	// communicator, goes on dumping (idle), as between a job's phases.
	Gap time.Duration
}

// Defaults fills zero fields; Validate refuses what is out of range.
func (c *Config) Defaults() {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.Devices, 2)
	def(&c.CommsPerDevice, 2)
	def(&c.Channels, 4)
	def(&c.Items, 2000)
	def(&c.Batch, 4)
	def(&c.WorkFloats, 256)
	def(&c.BytesPerItem, 64<<10)
	def(&c.Replays, 1)
	if c.Backend == "" {
		c.Backend = "cpu"
	}
	if len(c.FuncIDs) == 0 {
		for i := 0; i < FuncCount(); i++ {
			c.FuncIDs = append(c.FuncIDs, uint32(i))
		}
	}
}

// comm is one simulated communicator of a run.
type comm struct {
	*Comm
	index     int // among the communicators of its device
	rank      int // this device's rank in it, of nranks
	nranks    int
	id        uint64
	hook, ctx uintptr // what getDeviceHook gave this communicator
}

// Run plays NCCL against the plugin with the profile the plugin loaded
// (NCCL_HOOKS_PROFILE) and checks the plugin's output. The profile is passed
// so the harness can compute independently which events should match.
func Run(p *Plugin, prof *config.Profile, cfg Config) (*Summary, error) {
	cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("harness: %w", err)
	}
	if cfg.Ranks < 0 || cfg.Rank < 0 || (cfg.Ranks > 0 && cfg.Rank >= cfg.Ranks) || (cfg.Ranks == 0 && cfg.Rank != 0) {
		return nil, fmt.Errorf("harness: rank %d of %d processes: give a rank from 0 to ranks-1 (--ranks N --rank R)", cfg.Rank, cfg.Ranks)
	}
	if cfg.Slowdown > 1 && cfg.Backend != "cpu" {
		return nil, fmt.Errorf("harness: a planted slowdown exists on the cpu backend only")
	}
	if cfg.MidRun != nil && cfg.Backend == "gpu" && cfg.Replays < 2 {
		return nil, fmt.Errorf("harness: a mid-run step on the gpu comes between replays: give at least 2 (--replays)")
	}
	if err := checkRanks(cfg); err != nil {
		return nil, err
	}
	var bar *barrier
	if cfg.Barrier != "" {
		var err error
		if bar, err = openBarrier(cfg.Barrier, cfg); err != nil {
			return nil, err
		}
		defer bar.close()
	}
	start := time.Now()
	var (
		logs     map[int][]Event // per device, of the last cycle (one without Duration)
		emitted  = map[int]uint64{}
		elapsed  time.Duration
		cycles   int
		comms    []*comm
		hooked   bool   // a communicator of some cycle got a hook
		unhooked int    // communicators of cycles after the first that got none
		firstNo  string // the first of them
	)
	for {
		var (
			n   map[int]uint64
			e   time.Duration
			err error
		)
		comms, logs, n, e, err = cycle(p, prof, cfg, bar)
		if err != nil {
			if cycles > 0 {
				return nil, fmt.Errorf("harness: cycle %d: %w", cycles+1, err)
			}
			return nil, err
		}
		cycles++
		for _, c := range comms {
			switch {
			case c.hook != 0:
				hooked = true
			case cycles > 1:
				if unhooked++; firstNo == "" {
					firstNo = fmt.Sprintf("cycle %d, device %d communicator %d", cycles, c.Device, c.index)
				}
			}
		}
		elapsed += e
		for d, v := range n {
			emitted[d] += v
		}
		if cfg.Duration <= 0 || time.Since(start)+cfg.Gap >= cfg.Duration {
			break
		}
		time.Sleep(cfg.Gap)
	}
	s := &Summary{Config: cfg, PluginVersion: p.Version, Log: TakeLog(), Emit: elapsed, Total: time.Since(start), Cycles: cycles}
	s.HookActive = hooked
	if hooked && unhooked > 0 {
		// A soak's later communicators the plugin no longer profiles: a
		// job that makes communicators over and over would lose them.
		s.Problems = append(s.Problems, fmt.Sprintf("%d communicators of the cycles got no hook from getDeviceHook (the first: %s), where earlier ones did: see the plugin's log", unhooked, firstNo))
	}
	for d := range cfg.Devices {
		s.Emitted += emitted[d]
	}
	if cfg.Verify && cfg.EventsDir != "" {
		if err := WriteEventLogs(cfg.EventsDir, logs); err != nil {
			return s, err
		}
	}
	s.checkContexts(comms)
	if err := s.check(prof, logs, emitted); err != nil {
		return s, err
	}
	return s, nil
}

// cycle is one cycle of a run, as NCCL plays it: init every communicator
// (and getDeviceHook), emit, finalize every communicator. It returns the
// communicators with what getDeviceHook gave them, the event logs (with
// Verify) and the events emitted, by device.
func cycle(p *Plugin, prof *config.Profile, cfg Config, bar *barrier) ([]*comm, map[int][]Event, map[int]uint64, time.Duration, error) {
	var comms []*comm
	for d := 0; d < cfg.Devices; d++ {
		for k := 0; k < cfg.CommsPerDevice; k++ {
			name := fmt.Sprintf("harness-dev%d-comm%d", d, k)
			rank, nranks := d, cfg.Devices
			if cfg.Ranks > 0 {
				name = fmt.Sprintf("harness-comm%d", k)
				rank, nranks = cfg.Rank*cfg.Devices+d, cfg.Ranks*cfg.Devices
			}
			h := fnv.New64a()
			h.Write([]byte(name))
			// As NCCL does: init, then getDeviceHook for this communicator's
			// device, on the same thread (the plugin pairs them by thread).
			c, hook, ctx, err := p.InitWithHook(h.Sum64(), name, d, 1, nranks, rank)
			if err != nil {
				return nil, nil, nil, 0, err
			}
			comms = append(comms, &comm{Comm: c, index: k, rank: rank, nranks: nranks, id: h.Sum64(), hook: hook, ctx: ctx})
		}
	}
	var (
		logs    map[int][]Event // per device
		emitted map[int]uint64
		elapsed time.Duration
		err     error
	)
	switch cfg.Backend {
	case "cpu":
		logs, emitted, elapsed, err = emitCPU(comms, cfg, CounterStride(prof), bar)
	case "gpu":
		logs, emitted, elapsed, err = emitGPU(comms, cfg.Devices, cfg, CounterStride(prof))
	default:
		err = fmt.Errorf("harness: unknown backend %q (cpu or gpu)", cfg.Backend)
	}
	// Finalize even after a failed emit: the plugin must flush.
	for _, c := range comms {
		if ferr := p.Finalize(c.Comm); ferr != nil && err == nil {
			err = ferr
		}
	}
	if err != nil {
		return nil, nil, nil, 0, err
	}
	return comms, logs, emitted, elapsed, nil
}

// counterStride keeps the communicators' (channel, workCounter) pairs apart,
// so that a record traces back to the one event that produced it: NCCL's
// counters are per communicator, so they would repeat.
const counterStride = 1 << 40

// CounterStride is the stride a run of prof numbers its communicators'
// work items with: counterStride, or 0 (every communicator counts from 1,
// as NCCL's do) for a profile with work positions, whose drain knows a
// record's work counter from its position as NCCL numbers them
// (hookgen.Layout.Implied); its records are traced back by their comm field
// (emitterOf).
func CounterStride(prof *config.Profile) uint64 {
	for _, h := range prof.EnabledHooks() {
		if h.Buffer.Positions == config.PositionsWork {
			return 0
		}
	}
	return counterStride
}

// firstCounter is the work counter of communicator k's first work item on
// each of its channels with stride, the GPU harness's
// (gpuharness.Config.FirstCounter).
func firstCounter(k int, stride uint64) uint64 {
	cfg := gpuharness.Config{CounterStride: stride}
	return cfg.FirstCounter(k)
}

// emitCPU runs every channel of every communicator as its own thread, all
// at once, so communicators on one device race on the same channel ids.
func emitCPU(comms []*comm, cfg Config, stride uint64, bar *barrier) (map[int][]Event, map[int]uint64, time.Duration, error) {
	var chs []cpuChannel
	holdAt, holdMax := cfg.HoldAt, cfg.HoldMax
	if cfg.MidRun != nil {
		if holdAt <= 0 || holdAt >= cfg.Items {
			holdAt = cfg.Items / 2
		}
		if holdMax <= 0 {
			holdMax = 8 * cfg.Items
		}
	}
	var devOf []int
	for _, c := range comms {
		var delay time.Duration
		if cfg.StragglerDelay > 0 && c.rank == cfg.Straggler {
			delay = cfg.StragglerDelay
		}
		for ch := 0; ch < cfg.Channels; ch++ {
			chs = append(chs, cpuChannel{
				Hook: c.hook, Ctx: c.ctx, Comm: c.index,
				Channel:     ch,
				CounterBase: firstCounter(c.index, stride),
				Items:       cfg.Items,
				Batch:       cfg.Batch,
				WorkFloats:  cfg.WorkFloats,
				Slowdown:    cfg.Slowdown,
				FuncIDs:     cfg.FuncIDs,
				FuncOffset:  c.index*7 + ch,
				Log:         cfg.Verify,
				Arrive:      bar.counter(cfg, c.index, ch),
				NRanks:      c.nranks,
				Delay:       delay,
				HoldAt:      holdAt,
				HoldMax:     holdMax,
			})
			devOf = append(devOf, c.Device)
		}
	}
	t0 := time.Now()
	chLogs, items, err := runCPUChannels(chs, cfg.MidRun)
	elapsed := time.Since(t0)
	if err != nil {
		return nil, nil, 0, err
	}
	logs := map[int][]Event{}
	emitted := map[int]uint64{}
	for i, l := range chLogs {
		emitted[devOf[i]] += uint64(2 * items[i])
		if l != nil {
			logs[devOf[i]] = append(logs[devOf[i]], l...)
		}
	}
	return logs, emitted, elapsed, nil
}
