package lifecycle

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ncclhooks/ncclhooks/internal/backend"
	"github.com/ncclhooks/ncclhooks/internal/backend/cpu"
	"github.com/ncclhooks/ncclhooks/internal/backend/gpu"
	"github.com/ncclhooks/ncclhooks/internal/config"
	"github.com/ncclhooks/ncclhooks/internal/gpuinfo"
	"github.com/ncclhooks/ncclhooks/internal/hookgen"
	"github.com/ncclhooks/ncclhooks/internal/rings"
	"github.com/ncclhooks/ncclhooks/internal/schema"
	"github.com/ncclhooks/ncclhooks/internal/sinks"
)

// Session is the process-wide state of the plugin. NCCL may init and
// finalize communicators, and dlclose and reload the library, any number of
// times in one process; the Go image stays resident (-z nodelete), so a
// Session outlives every cycle and is reused by the next.
type Session struct {
	mu  sync.Mutex
	env Env

	setupDone bool
	inactive  string // non-empty: why the plugin does nothing
	knobs     Knobs
	// host: the hooks are fed from NCCL's host events (NCCL_HOOKS_SOURCE),
	// compiled for the host at the first init; NCCL's device hook is not used.
	host    bool
	version int // the profiler struct NCCL loaded (5, 6, 7), from the first init

	profile  *config.Profile
	module   *hookgen.Module
	compiled backend.Compiled
	gpu      *gpu.Compiled // compiled, on the gpu backend
	// cacheWarned: the compile cache's failure was logged (once).
	cacheWarned bool
	// slowWarned: a finalize that gave up waiting for the output was logged.
	slowWarned bool
	devices    map[int]backend.Device
	// funcNames are the function names by id, from ncclProfilerDevFuncName.
	// Written once, before the first device is added to the drainer, whose
	// goroutines read them (Drainer.Add orders the two).
	funcNames []string

	drainer *rings.Drainer
	// live is drainer, for Exit when mu cannot be had in time.
	live   atomic.Pointer[rings.Drainer]
	exited bool // Exit ran: the drain reads no device memory again
	sinks  []sinks.Sink
	jsonl  *sinks.JSONL
	prom   *sinks.Prom // nil without metrics outputs (Prometheus, OTLP)

	// nvml samples the GPUs' state for the device lines of each dump;
	// opened by the first background read (never on NCCL's threads), nil
	// without NVML.
	nvmlOnce sync.Once
	nvml     *gpuinfo.Sampler
	nvmlErr  sync.Once // a GPU NVML does not know is logged once
	nvmlMu   sync.Mutex
	nvmlLast map[string]gpuinfo.State // the latest state read, by UUID|bus id
	nvmlBusy map[string]bool          // a read is under way

	comms map[uint64]*comm // live communicators by id
	// sharedCtxIgnored: the NCCL_HOOKS_SHARED_CTX warning was logged.
	sharedCtxIgnored bool
	nextID           uint64
	// commsOnDevice counts the communicators handed a hook on each device:
	// the next one gets that index (the comm intrinsic).
	commsOnDevice map[int]int

	deviceHookDeclined bool // the one INFO that the host source declines NCCL's device hook

	// budget is the registers a hook may use (readBudget; 0: the knob or
	// gpu.DefaultRegisterBudget), budgetRead what the kernels that call the
	// hook have (0: not read); both valid once budgetGot (waitBudget).
	budget, budgetRead int
	budgetCh           chan budgetResult // startBudget's result; nil: not read
	budgetGot          bool
	// Live reload (reload.go). reloadMu serialises reloads; the rest is
	// under mu. sw is the switch whose entry and slots NCCL holds (nil:
	// NCCL_HOOKS_RELOAD off, or no switch); slots are each device's, by
	// communicator index; epoch counts the profiles made active by a
	// reload; retiredDevices are the earlier epochs' modules, kept loaded.
	reloadMu       sync.Mutex
	watching       bool
	sw             backend.Switch
	switchFailed   bool
	unswitched     bool              // a communicator got a module's own entry: no reload
	slots          map[int][]*slot   // the live communicators' switch slots, by device
	freeSlots      map[int][]uintptr // switch slots of finalized communicators, for the next ones
	switchLogged   map[int]bool      // the switch's INFO was logged, by device
	epoch          int
	retiredDevices []backend.Device
	reloadWarned   string // the failing version last warned about
	// lostWarned is the loss the last "lost N events" WARN reported: a
	// later last finalize warns again only when more were lost.
	lostWarned uint64
}

// comm is one communicator, from its init to its finalize.
type comm struct {
	id        uint64
	commID    uint64
	name      string
	nNodes    int
	nRanks    int
	rank      int
	hookAsked bool // getDeviceHook gave it its context: index on device
	device    int
	index     int
	// blk is the slot of its context block in the active module's device
	// (backend.Device.NewComm), released at its finalize for reuse; -1:
	// it has none of its own (NCCL_HOOKS_SHARED_CTX's block 0).
	blk int
	// sw is its switch slot (NCCL_HOOKS_RELOAD), nil without one.
	sw *slot
}

func (c *comm) String() string {
	return fmt.Sprintf("comm %#x %q rank %d/%d", c.commID, c.name, c.rank, c.nRanks)
}

// Init registers a communicator and returns its handle for DeviceHook and
// Finalize. The first one of the process reads the knobs
// and the profile and opens the outputs.
// version is the profiler struct NCCL loaded (5, 6 or 7; 0: unknown).
func (s *Session) Init(commID uint64, name string, nNodes, nRanks, rank, version int) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.setupDone {
		s.setupDone = true
		s.version = version
		s.setup()
		if s.inactive == "" {
			if err := s.openOutputs(); err != nil {
				s.disableLocked(err.Error())
			}
		}
		s.startWatch()
	}
	s.nextID++
	id := s.nextID
	c := &comm{id: id, commID: commID, name: name, nNodes: nNodes, nRanks: nRanks, rank: rank}
	s.comms[id] = c
	if s.drainer != nil && !s.exited {
		// The last finalize quiesced the drain (SettleQuiet): this
		// communicator may run the hooks.
		s.drainer.Resume()
	}
	if s.inactive == "" {
		s.env.Log(LogInfo, fmt.Sprintf("ncclhooks: %s: profile %q (%d hooks), source %s, backend %s, output %s",
			c, s.profile.Name, len(s.module.Hooks), s.sourceName(), s.knobs.Backend, s.jsonl.Path()))
	}
	return id
}

// setup reads the knobs and the profile and generates its source. Compiling
// waits for the first getDeviceHook: NCCL without the device hook never asks.
func (s *Session) setup() {
	k, err := s.env.Knobs()
	s.knobs = k
	if err != nil {
		s.disableLocked(err.Error())
		return
	}
	if k.Profile == "" {
		// Loaded as NCCL's profiler but given nothing to do: say so once.
		s.disableLocked("NCCL_HOOKS_PROFILE is not set: the plugin is loaded but records nothing; set it to a hook profile (YAML)")
		return
	}
	p, err := config.Load(k.Profile)
	if err != nil {
		s.refuse(fmt.Sprintf("profile not loaded (fix it, or unset NCCL_HOOKS_PROFILE):\n%v", err))
		return
	}
	m, err := hookgen.Generate(p)
	if err != nil {
		s.profile = p // names the output's header
		s.refuse(fmt.Sprintf("profile %s: %v", k.Profile, err))
		return
	}
	s.profile, s.module = p, m
	s.chooseSource()
	if s.inactive == "" && s.env.NCCLLibrary != nil && k.Backend != "cpu" {
		s.startBudget()
	}
}

func (s *Session) outputDir() string {
	if s.knobs.DumpDir != "" {
		return s.knobs.DumpDir
	}
	return s.profile.Output.DumpDir
}

// openOutputs starts the sinks and the drainer. They live as long as the
// process: totals stay cumulative over every init/finalize cycle, and the
// last finalize of a cycle settles them (a final dump, files flushed).
func (s *Session) openOutputs() error {
	host, _ := os.Hostname()
	h := s.header(host)
	h.Fields, h.Drained, h.Funcs = sinks.HeaderFields(s.module), sinks.HeaderDrained(s.module), s.names()
	j, err := sinks.OpenJSONL(s.outputDir(), h, sinks.JSONLOptions{Compress: s.knobs.Compress, MaxBytes: s.knobs.MaxOutputSize, Log: s.env.Log})
	if err != nil {
		return fmt.Errorf("NCCL_HOOKS_DUMP_DIR / output.dump_dir: %v", err)
	}
	s.jsonl = j
	if name := sinks.FileName(host, os.Getpid()) + schema.Suffix(s.knobs.Compress); filepath.Base(j.Path()) != name {
		s.env.Log(LogInfo, fmt.Sprintf("ncclhooks: %s already exists in the dump directory (an earlier run with this host and pid, or a link): writing %s instead", name, j.Path()))
	}
	s.sinks = []sinks.Sink{j}
	if p := s.openProm(host); p != nil {
		s.prom = p
		s.sinks = append(s.sinks, p)
	}
	s.drainer = s.newDrainer(s.profile, sinks.Multi(s.sinks...))
	s.live.Store(s.drainer)
	return nil
}

// newDrainer starts the drainer of one profile epoch, writing to sink.
func (s *Session) newDrainer(p *config.Profile, sink sinks.Sink) *rings.Drainer {
	return rings.NewDrainer(rings.Options{
		DumpInterval: p.Output.DumpInterval,
		RingCapacity: p.Output.RingCapacity,
		Sink:         sink,
		FuncName:     s.funcName,
		Log:          s.env.Log,
		DeviceState:  s.deviceState,
	})
}

// header is the JSON lines header of this process, without what only a
// generated module says (fields, drained hooks, function names).
func (s *Session) header(host string) sinks.Header {
	h := sinks.Header{ProfileFile: s.knobs.Profile, Host: host, PID: os.Getpid(), Backend: s.knobs.Backend,
		PluginVersion: s.env.PluginVersion, NCCLVersion: s.ncclVersion()}
	if h.PluginVersion == "" {
		h.PluginVersion = "unknown"
	}
	if s.profile != nil {
		h.Profile, h.ProfileFile, h.ProfileHash = s.profile.Name, s.profile.File, s.profile.Hash
	}
	return h
}

// ncclVersion is the version of the NCCL that loaded the plugin, as the
// header names it ("2.28.9"), "unknown" where the session knows none: the
// one place the header takes it from.
func (s *Session) ncclVersion() string {
	v := s.env.NCCLVersion()
	if v <= 0 {
		return "unknown"
	}
	return fmt.Sprintf("%d.%d.%d", v/10000, v/100%100, v%100)
}

// refuse makes the plugin inactive for a profile that cannot run, and says
// so in the dump directory too (an inactive line, in a file of its own when
// the outputs are not open yet): in a real job the WARN goes to a log few
// read, and a report of the directory must not look like a job that ran
// none of the profiled collectives.
func (s *Session) refuse(why string) {
	if s.inactive != "" {
		return
	}
	s.disableLocked(why)
	if s.jsonl != nil {
		if err := s.jsonl.Inactive(why); err != nil {
			s.env.Log(LogWarn, fmt.Sprintf("ncclhooks: writing the inactive line: %v", err))
		}
		return
	}
	dir := s.knobs.DumpDir
	switch {
	case dir != "":
	case s.profile != nil:
		dir = s.profile.Output.DumpDir
	default:
		dir = config.DefaultDumpDir
	}
	host, _ := os.Hostname()
	j, err := sinks.OpenJSONL(dir, s.header(host), sinks.JSONLOptions{Compress: s.knobs.Compress, Log: s.env.Log})
	if err == nil {
		err = j.Inactive(why)
		if cerr := j.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		s.env.Log(LogWarn, fmt.Sprintf("ncclhooks: the inactive line could not be written to %s: %v", dir, err))
	}
}

// openProm starts the metrics outputs the knobs ask for: the Prometheus
// textfiles, /metrics and the OTLP export, which share one set of metrics
// (sinks.Prom). Each that fails is left out with one WARN and the rest
// stays active: nil when none could start.
func (s *Session) openProm(host string) *sinks.Prom {
	if s.knobs.PromDir == "" && s.knobs.PromAddr == "" && s.knobs.OTLPEndpoint == "" {
		return nil
	}
	opts := sinks.PromOptions{DumpStats: s.knobs.PromDumpStats, Host: host}
	p, err := sinks.NewProm(s.knobs.PromDir, opts)
	live := s.knobs.PromDir != "" && err == nil // the textfiles are written
	if err != nil {
		s.env.Log(LogWarn, fmt.Sprintf("ncclhooks: Prometheus textfiles disabled (NCCL_HOOKS_PROM_DIR), everything else stays active: %v", err))
		if s.knobs.PromAddr == "" && s.knobs.OTLPEndpoint == "" {
			return nil
		}
		if p, err = sinks.NewProm("", opts); err != nil {
			return nil
		}
	}
	if s.knobs.PromAddr != "" {
		if err := p.Serve(s.knobs.PromAddr); err != nil {
			s.env.Log(LogWarn, fmt.Sprintf("ncclhooks: /metrics endpoint disabled (NCCL_HOOKS_PROM_ADDR=%s), everything else stays active: %v", s.knobs.PromAddr, err))
		} else {
			live = true
			s.env.Log(LogInfo, fmt.Sprintf("ncclhooks: serving /metrics at http://%s/metrics", p.Addr()))
		}
	}
	if s.knobs.OTLPEndpoint != "" {
		if err := p.ExportOTLP(s.otlpOptions()); err != nil {
			s.env.Log(LogWarn, fmt.Sprintf("ncclhooks: OTLP export disabled (NCCL_HOOKS_OTLP_ENDPOINT), everything else stays active: %v", err))
		} else {
			live = true
			s.env.Log(LogInfo, fmt.Sprintf("ncclhooks: exporting the metrics to %s (OTLP/HTTP protobuf) at every dump", p.OTLPEndpoint()))
		}
	}
	if !live {
		return nil
	}
	return p
}

// otlpOptions configure the OTLP export. A final dump waits for its export
// at most half the finalize's bound (and of SIGTERM's), so that a receiver
// that hangs never makes the finalize give up on the files.
func (s *Session) otlpOptions() sinks.OTLPOptions {
	o := sinks.OTLPOptions{Endpoint: s.knobs.OTLPEndpoint, Headers: s.knobs.OTLPHeaders, Timeout: s.knobs.OTLPTimeout,
		Job: s.knobs.Job, Version: s.env.PluginVersion, Log: s.env.Log}
	if o.Timeout <= 0 {
		o.Timeout = sinks.DefaultOTLPTimeout
	}
	o.FinalWait = min(o.Timeout, s.finalizeTimeout()/2)
	if s.knobs.TermDump > 0 {
		o.FinalWait = min(o.FinalWait, s.knobs.TermDump/2)
	}
	if o.Version == "" {
		o.Version = "unknown"
	}
	return o
}

// identity is a device's identity, without its state: the device line
// written when a device is loaded (NVML is not asked on NCCL's thread).
func identity(d backend.Device) sinks.DeviceState {
	id := d.Identity()
	return sinks.DeviceState{Device: d.Ordinal(), TimeUnixNs: time.Now().UnixNano(), Name: id.Name, UUID: id.UUID, PCIBusID: id.PCIBusID}
}

// deviceState is a device's identity and its state from NVML, for the
// device lines of a dump (the drainer calls it). NVML is never called here:
// a query that hangs in the driver must not hold up the drain, nor NCCL's
// finalize behind it. Each call returns the latest state read and starts
// the next read in the background (one at a time per device), so a dump's
// state is at most a dump interval old and the first dump has none.
// Without NVML the state is left out, after one INFO.
func (s *Session) deviceState(d backend.Device) sinks.DeviceState {
	st := identity(d)
	if st.UUID == "" && st.PCIBusID == "" {
		return st // the cpu backend: no GPU to ask about
	}
	key := st.UUID + "|" + st.PCIBusID
	s.nvmlMu.Lock()
	defer s.nvmlMu.Unlock()
	if s.nvmlLast == nil {
		s.nvmlLast, s.nvmlBusy = map[string]gpuinfo.State{}, map[string]bool{}
	}
	st.State = s.nvmlLast[key]
	if !s.nvmlBusy[key] {
		s.nvmlBusy[key] = true
		go s.sample(key, st.Device, st.UUID, st.PCIBusID)
	}
	return st
}

// sample reads one GPU's state from NVML (opened by the first call).
func (s *Session) sample(key string, ord int, uuid, bus string) {
	defer func() {
		// A goroutine of its own: a panic here would end the job.
		if r := recover(); r != nil {
			s.env.Log(LogWarn, fmt.Sprintf("ncclhooks: device %d: reading NVML panicked (%v): its device lines keep the last state read", ord, r))
			return // busy stays set: no more reads of this GPU
		}
		s.nvmlMu.Lock()
		s.nvmlBusy[key] = false
		s.nvmlMu.Unlock()
	}()
	s.nvmlOnce.Do(s.openNVML)
	if s.nvml == nil {
		return
	}
	state, err := s.nvml.Sample(uuid, bus)
	if err != nil {
		s.nvmlErr.Do(func() {
			s.env.Log(LogInfo, fmt.Sprintf("ncclhooks: device %d: %v: its device lines carry no clocks, temperature or power", ord, err))
		})
		return
	}
	s.nvmlMu.Lock()
	s.nvmlLast[key] = state
	s.nvmlMu.Unlock()
}

func (s *Session) openNVML() {
	open := s.env.NVML
	if open == nil {
		open = gpuinfo.Open
	}
	lib, err := open()
	if err == nil {
		s.nvml, err = gpuinfo.NewSampler(lib)
	}
	if err != nil {
		s.env.Log(LogInfo, fmt.Sprintf("ncclhooks: NVML not available (%v): device lines name the GPUs by the CUDA driver's UUID and PCI bus id, without clocks, throttling, temperature or power", err))
	}
}

// DeviceHook returns the hook and a context of its own for the communicator
// whose getDeviceHook this is, compiling the profile on first use and loading
// it once per device. commID is the communicator whose init ran last on the
// calling thread (0: none; then the oldest communicator still waiting for a
// hook is taken, so that a caller that asks from another thread still gets
// a distinct context per communicator).
func (s *Session) DeviceHook(ord int, commID uint64) (hook, ctx uintptr) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inactive != "" || s.module == nil {
		return 0, 0
	}
	if s.host {
		if !s.deviceHookDeclined {
			s.deviceHookDeclined = true
			s.env.Log(LogInfo, "ncclhooks: NCCL offers the device hook, but the hooks run on its host events (NCCL_HOOKS_SOURCE=host): no device hook")
		}
		return 0, 0
	}
	c := s.comms[commID]
	if c == nil || c.hookAsked {
		c = s.waitingComm()
	}
	d, ok := s.devices[ord]
	if !ok {
		s.identifyDevice(ord, c)
		if d = s.loadDevice(ord); d == nil {
			return 0, 0
		}
	}
	cctx, index, blk, ok := s.attach(d, ord, c)
	if !ok {
		return 0, 0
	}
	if s.knobs.Reload > 0 {
		return s.switchHook(ord, index, blk, c, d.Entry(), cctx)
	}
	return d.Entry(), cctx
}

// sharedCtx says whether every communicator is given block 0
// (NCCL_HOOKS_SHARED_CTX, but with work positions).
func (s *Session) sharedCtx() bool { return s.knobs.SharedCtx && !s.module.Work }

// commBlock gives communicator index a context block on device d: the
// lowest free slot (backend.Device.NewComm), or block 0 with
// NCCL_HOOKS_SHARED_CTX (blk -1: not its own, never released).
func (s *Session) commBlock(d backend.Device, index int) (ctx uintptr, blk int, err error) {
	if s.sharedCtx() {
		ctx, err = d.CommCtx(0)
		return ctx, -1, err
	}
	blk, ctx, err = d.NewComm(index)
	return ctx, blk, err
}

// attach gives communicator c (nil: a getDeviceHook with no init before it)
// the next index on device d and a context block (the lowest free slot),
// and writes its comm line.
func (s *Session) attach(d backend.Device, ord int, c *comm) (ctx uintptr, index, blk int, ok bool) {
	index = s.commsOnDevice[ord]
	if s.knobs.SharedCtx && s.module.Work && !s.sharedCtxIgnored {
		s.sharedCtxIgnored = true
		s.env.Log(LogWarn, "ncclhooks: NCCL_HOOKS_SHARED_CTX=1 is ignored: with positions: work each communicator's block holds its own regions, one writer each")
	}
	cctx, blk, err := s.commBlock(d, index)
	if err != nil {
		// Only this communicator goes without a hook.
		s.env.Log(LogWarn, fmt.Sprintf("ncclhooks: device %d: no hook for communicator %d: %v", ord, index, err))
		return 0, index, -1, false
	}
	s.commsOnDevice[ord] = index + 1
	info := sinks.Comm{Device: ord, Index: index, UUID: d.Identity().UUID}
	desc := fmt.Sprintf("communicator %d", index) // getDeviceHook with no init before it
	if c != nil {
		c.hookAsked, c.device, c.index, c.blk = true, ord, index, blk
		info.ID, info.Name, info.Rank, info.NRanks, info.NNodes = c.commID, c.name, c.rank, c.nRanks, c.nNodes
		desc = c.String()
	}
	if err := s.jsonl.Comm(info); err != nil {
		s.env.Log(LogWarn, fmt.Sprintf("ncclhooks: writing the comm line: %v", err))
	}
	s.env.Log(LogInfo, fmt.Sprintf("ncclhooks: %s: device %d, comm index %d (context block %d of %d), hook %#x ctx %#x", desc, ord, index, blk, d.Comms(), d.Entry(), cctx))
	return cctx, index, blk, true
}

// identifyDevice names device ord's GPU and the rank of c (its first
// communicator; nil: none) in the Prometheus outputs. Called before the
// device is loaded, so before its first dump: its series keep their labels.
func (s *Session) identifyDevice(ord int, c *comm) {
	if s.prom == nil {
		return
	}
	id := sinks.DeviceIdentity{GPU: gpuName(ord)}
	if c != nil {
		id.Rank = strconv.Itoa(c.rank)
		id.CommID, id.CommName, id.NRanks = c.commID, c.name, c.nRanks
	}
	s.prom.Identify(ord, id)
}

// gpuName names device ord's GPU in the Prometheus outputs (the file name
// and the gpu label) before it is loaded: by ordinal; loadDevice renames it
// by its UUID.
func gpuName(ord int) string { return sinks.GPUName(ord, "") }

// waitingComm is the oldest communicator that has not asked for a hook.
func (s *Session) waitingComm() *comm {
	var best *comm
	for _, c := range s.comms {
		if !c.hookAsked && (best == nil || c.id < best.id) {
			best = c
		}
	}
	return best
}

// loadDevice compiles the profile on first use and loads it on device ord;
// nil after one WARN if that fails (the plugin goes inactive).
func (s *Session) loadDevice(ord int) backend.Device {
	if s.compiled == nil {
		start := time.Now()
		c, err := s.compile()
		if err != nil {
			s.refuse(err.Error())
			return nil
		}
		s.compiled = c
		s.env.Log(LogInfo, fmt.Sprintf("ncclhooks: compiled profile %q in %v: %s", s.profile.Name,
			time.Since(start).Round(time.Microsecond), c.Info()))
	}
	start := time.Now()
	d, err := LoadDevice(s.compiled, s.module, ord, s.names(), s.drainer, s.jsonl.Clock)
	if s.gpu != nil {
		// Without nvJitLink a device's module is compiled at its load.
		s.warnCache(s.gpu.CacheFailure())
	}
	if err != nil {
		s.disableLocked(err.Error()) // the backend names the device
		return nil
	}
	s.devices[ord] = d
	if u := d.Identity().UUID; s.prom != nil && u != "" {
		// Microseconds after the device joined the drainer: only a dump in
		// that window would write a textfile under the ordinal's name.
		s.prom.NameGPU(ord, u)
	}
	if err := s.jsonl.Device(ptr(identity(d))); err != nil {
		s.env.Log(LogWarn, fmt.Sprintf("ncclhooks: writing the device line: %v", err))
	}
	s.deviceState(d) // starts reading its state in the background, for the first dump
	var bufs []string
	m := s.module
	for _, h := range m.Hooks {
		if h.Work {
			drained := ""
			if h.Hook.DrainAggregates() {
				drained = ", START and STOP paired by the drain into its aggregates"
			}
			bufs = append(bufs, fmt.Sprintf("%s: %d regions x %d slots x %d B per communicator, positions from the work counter, %s%s",
				h.Name, config.RegionChannels, h.RegionSlots, 8*h.Layout.SlotWords(), h.Overflow, drained))
			continue
		}
		bufs = append(bufs, fmt.Sprintf("%s: %d slots x %d B, %s", h.Name, h.Slots, 8*h.Layout.SlotWords(), h.Overflow))
	}
	if m.Work {
		s.env.Log(LogInfo, fmt.Sprintf("ncclhooks: device %d loaded in %v, hook %#x; buffers: %s; a block of %d B of host-mapped memory per communicator, for up to %d communicators", ord,
			time.Since(start).Round(time.Microsecond), d.Entry(), strings.Join(bufs, "; "), m.Block.Bytes, hookgen.WorkMaxComms))
		return d
	}
	room := fmt.Sprintf("%d in the arena", m.ArenaComms())
	if m.Arena.Bound {
		room = fmt.Sprintf("room for %d communicators", m.ArenaComms())
	}
	s.env.Log(LogInfo, fmt.Sprintf("ncclhooks: device %d loaded in %v, hook %#x; buffers: %s; context blocks of %d B per communicator, %s (%d MiB)", ord,
		time.Since(start).Round(time.Microsecond), d.Entry(), strings.Join(bufs, "; "), m.Block.Bytes, room, m.Arena.Bytes>>20))
	return d
}

func (s *Session) compile() (backend.Compiled, error) {
	switch s.knobs.Backend {
	case "cpu":
		// A cpu hook is a host function: only the ncclhooks harness can call
		// it. Handing it to real NCCL would crash its kernels.
		if !s.env.HarnessPresent() {
			return nil, fmt.Errorf("NCCL_HOOKS_BACKEND=cpu: cpu hooks are host functions that only the ncclhooks harness can call; use gpu or auto")
		}
		return cpu.Compile(s.module, s.knobs.CC, s.knobs.CCTimeout)
	case "gpu":
		return s.compileGPU()
	default: // auto
		c, err := s.compileGPU()
		if err != nil && s.env.HarnessPresent() {
			s.env.Log(LogInfo, fmt.Sprintf("ncclhooks: no GPU backend (%v): using the cpu backend", err))
			s.knobs.Backend = "cpu"
			return cpu.Compile(s.module, s.knobs.CC, s.knobs.CCTimeout)
		}
		return c, err
	}
}

func (s *Session) compileGPU() (backend.Compiled, error) {
	s.waitBudget()
	budget := s.knobs.MaxRegisters
	if s.budget > 0 {
		budget = s.budget
	}
	if budget > 0 && budget < gpu.MinRegisterBudget {
		return nil, fmt.Errorf("the kernels that call the hook have %d registers, fewer than any hook needs (%d): no device hook (NCCL_HOOKS_MAX_REGISTERS overrides what was read)",
			budget, gpu.MinRegisterBudget)
	}
	c, cacheErr, err := gpu.Open(s.module, s.knobs.CacheDir, gpu.Options{Budget: budget,
		Caps: s.knobs.RegisterCaps, Extra: strings.Fields(s.knobs.NVRTCOptions)})
	s.warnCache(cacheErr)
	if err != nil {
		return nil, err
	}
	s.gpu = c
	s.knobs.Backend = "gpu"
	if refused := c.Refused(); len(refused) > 0 {
		// Only the hooks that could fault NCCL's kernels go: the others run.
		var lines []string
		for _, r := range refused {
			lines = append(lines, "  "+r.String())
			if err := s.jsonl.Refused(r.Hook, r.Pos.String(), r.Why); err != nil {
				s.env.Log(LogWarn, fmt.Sprintf("ncclhooks: writing the refused line: %v", err))
			}
		}
		s.env.Log(LogWarn, fmt.Sprintf("ncclhooks: %d of the profile's hooks are left out, the others run (simplify them: fewer fields, lets or aggregates; or split them):\n%s",
			len(refused), strings.Join(lines, "\n")))
		s.module = c.Module()
	}
	return c, nil
}

// warnCache logs the first compile-cache failure: the module is compiled
// without the cache, the plugin stays active.
func (s *Session) warnCache(err error) {
	if err == nil || s.cacheWarned {
		return
	}
	s.cacheWarned = true
	s.env.Log(LogWarn, fmt.Sprintf("ncclhooks: compile cache disabled, compiling without it (NCCL_HOOKS_CACHE_DIR): %v", err))
}

// names are the function names by id, from NCCL's ncclProfilerDevFuncName,
// or the host source's table (read once: they are fixed for the process).
func (s *Session) names() []string {
	if s.funcNames == nil {
		s.funcNames = []string{}
		for id := 0; id < hookgen.MaxFuncIDs; id++ {
			n := s.nameOf(uint32(id))
			if n == "" {
				break
			}
			s.funcNames = append(s.funcNames, n)
		}
		if len(s.module.FuncSets) > 0 && len(s.funcNames) == 0 {
			s.env.Log(LogWarn, "ncclhooks: NCCL does not export ncclProfilerDevFuncName: name predicates (func matches ...) match nothing")
		} else if un := s.module.UnmatchedFuncSets(s.funcNames); len(un) > 0 {
			// Most likely a typo: the hook records nothing, which would
			// otherwise look like a job that never ran that collective.
			var lines []string
			for _, u := range un {
				lines = append(lines, "  "+u.String())
			}
			s.env.Log(LogWarn, fmt.Sprintf("ncclhooks: %d name predicate(s) match none of NCCL's %d function names (ncclhooks funcs OUTPUT lists them); their hooks match no event:\n%s",
				len(un), len(s.funcNames), strings.Join(lines, "\n")))
		}
	}
	return s.funcNames
}

// funcName is the drainer's resolver: NCCL's name, or a numeric fallback.
func (s *Session) funcName(id uint32) string {
	if int(id) < len(s.funcNames) {
		return s.funcNames[id]
	}
	if n := s.nameOf(id); n != "" {
		return n
	}
	return fmt.Sprintf("func#%d", id)
}

// nameOf is the function-name table of the session's source.
func (s *Session) nameOf(id uint32) string {
	if s.host {
		return s.env.HostFuncName(id)
	}
	return s.env.FuncName(id)
}

// Finalize unregisters a communicator; the last one settles the drain:
// everything that reached a buffer is in the outputs when it returns.
func (s *Session) Finalize(id uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.comms[id]
	if !ok {
		return
	}
	desc := c.String()
	delete(s.comms, id)
	if s.drainer == nil {
		return
	}
	if len(s.comms) == 0 {
		s.waitBudget() // its INFO line is the job's, even where no hook was asked for
	}
	s.retire(c, desc)
	if len(s.comms) > 0 {
		return
	}
	// The settle writes to storage that may be slow or hung (a network file
	// system): NCCL's finalize waits for it at most FinalizeTimeout.
	// Quiet after it: no hook runs until the next init, and at process
	// exit the CUDA driver unmaps the host memory the buffers lie in.
	if sum, ok := s.settleQuiet(); ok {
		s.env.Log(LogInfo, fmt.Sprintf("ncclhooks: %s: last communicator finalized: %s; output %s", desc, sum, s.jsonl.Path()))
		s.warnLost(sum)
	} else if !s.slowWarned {
		s.slowWarned = true
		s.env.Log(LogWarn, fmt.Sprintf("ncclhooks: %s: the output did not settle within %v (slow or hung storage under %s): finalize returns; the records not yet written are counted as dropped_write_failed, and the final dump_stats is written when the write in progress returns (NCCL_HOOKS_FINALIZE_TIMEOUT sets the wait; this warning is not repeated)",
			desc, s.finalizeTimeout(), s.jsonl.Path()))
	}
}

// settleQuiet settles the drain and quiesces it (Drainer.SettleQuiet),
// waiting at most FinalizeTimeout; past that the output sheds the records
// not yet written, its final dump comes when the write in progress
// returns, and ok is false (s.mu held).
func (s *Session) settleQuiet() (sum rings.Summary, ok bool) {
	done := make(chan rings.Summary, 1)
	go func() { done <- s.drainer.SettleQuiet() }()
	timer := time.NewTimer(s.finalizeTimeout())
	defer timer.Stop()
	select {
	case sum = <-done:
		return sum, true
	case <-timer.C:
		s.jsonl.Shed()
		return sum, false
	}
}

// retire hands finalized communicator c's context block back for reuse
// (s.mu held): NCCL runs none of its kernels after its finalize. With work
// positions the drain first settles its regions (at its next pass, or in
// the settle of the last finalize, which follows); its switch slot, which
// NCCL no longer calls, goes to the next communicator on its device.
func (s *Session) retire(c *comm, desc string) {
	if !c.hookAsked {
		return
	}
	if c.sw != nil {
		s.slots[c.device] = slices.DeleteFunc(s.slots[c.device], func(x *slot) bool { return x == c.sw })
		s.freeSlots[c.device] = append(s.freeSlots[c.device], c.sw.addr)
		c.sw = nil
	}
	if c.blk < 0 || s.devices[c.device] == nil {
		return
	}
	s.drainer.Retire(c.device, c.blk)
	what := "its context block is reused by the next communicator on the device"
	if s.module.Work {
		what = "its regions are settled at the drain's next pass, polled no more, and then its block is reused by the next communicator on the device"
	}
	s.env.Log(LogInfo, fmt.Sprintf("ncclhooks: %s finalized (device %d, comm index %d, context block %d): %s", desc, c.device, c.index, c.blk, what))
	c.blk = -1
}

// warnLost logs one WARN at the last finalize when events were lost (the
// drain's drops and the records the file could not take): the per-drop
// WARN comes at the first drop, when the job has barely started, and this
// one says what the whole job lost. Again only when more were lost since.
func (s *Session) warnLost(sum rings.Summary) {
	t := sum.Total()
	lost := t.Dropped + s.jsonl.Lost()
	if lost <= s.lostWarned {
		return
	}
	s.lostWarned = lost
	s.env.Log(LogWarn, fmt.Sprintf("ncclhooks: lost %d events of %d matched (%d dropped before the output, %d not written to it): the output holds the rest, and its dump_stats count each loss by stage: %s",
		lost, t.Matched, t.Dropped, lost-t.Dropped, s.jsonl.Path()))
}

func (s *Session) finalizeTimeout() time.Duration {
	if s.knobs.FinalizeTimeout > 0 {
		return s.knobs.FinalizeTimeout
	}
	return DefaultFinalizeTimeout
}

// TermDump is how long a SIGTERM should wait for Terminate's final dump;
// 0 when it should not be caught (the knob is off, or there are no outputs).
func (s *Session) TermDump() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.drainer == nil {
		return 0
	}
	return s.knobs.TermDump
}

// Terminate writes the final dump of a process that is being killed
// (SIGTERM) as the last finalize would: the hooks may still be running, so
// positions reserved and not yet written count as torn. The drainer keeps
// running, in case the job's own handler does not end the process.
func (s *Session) Terminate() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.drainer == nil {
		return
	}
	// Half the SIGTERM wait for the writes, then the rest for the final
	// dump alone (Shed), as a finalize does with slow storage.
	done := make(chan rings.Summary, 1)
	go func() { done <- s.drainer.Settle() }()
	var sum rings.Summary
	select {
	case sum = <-done:
	case <-time.After(s.knobs.TermDump / 2):
		s.jsonl.Shed()
		sum = <-done
	}
	s.env.Log(LogInfo, fmt.Sprintf("ncclhooks: SIGTERM: final dump written before the signal takes its course: %s; output %s", sum, s.jsonl.Path()))
}

// Disable makes the plugin inactive with one WARN (a panic in an entry
// point, for one).
func (s *Session) Disable(why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.disableLocked(why)
}

func (s *Session) disableLocked(why string) {
	if s.inactive != "" {
		return
	}
	s.inactive = why
	s.env.Log(LogWarn, "ncclhooks: inactive: "+why)
}

func ptr[T any](v T) *T { return &v }
