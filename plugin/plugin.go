package main

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/ncclhooks/ncclhooks/backend"
	"github.com/ncclhooks/ncclhooks/backend/cpu"
	"github.com/ncclhooks/ncclhooks/backend/gpu"
	"github.com/ncclhooks/ncclhooks/config"
	"github.com/ncclhooks/ncclhooks/hookgen"
	"github.com/ncclhooks/ncclhooks/nvrtc"
	"github.com/ncclhooks/ncclhooks/rings"
	"github.com/ncclhooks/ncclhooks/sinks"
)

const (
	logWarn = 2
	logInfo = 3
)

// plugin is the process-wide state. NCCL may init and finalize
// communicators, and dlclose and reload the library, any number of times in
// one process; the Go image stays resident (-z nodelete), so this state
// outlives every cycle and is reused by the next.
var plugin = &state{devices: map[int]backend.Device{}, comms: map[uint64]*comm{}, commsOnDevice: map[int]int{}}

type state struct {
	mu sync.Mutex

	setupDone bool
	inactive  string // non-empty: why the plugin does nothing
	knobs     knobs

	profile  *config.Profile
	module   *hookgen.Module
	compiled backend.Compiled
	devices  map[int]backend.Device
	// names are the function names by id, from ncclProfilerDevFuncName.
	// Written once, before the first device is added to the drainer, whose
	// goroutines read them (Drainer.Add orders the two).
	names []string

	drainer *rings.Drainer
	sinks   []sinks.Sink
	jsonl   *sinks.JSONL

	comms  map[uint64]*comm // live communicators by id
	nextID uint64
	// commsOnDevice counts the communicators handed a hook on each device:
	// the next one gets that index (the comm intrinsic).
	commsOnDevice map[int]int
}

// comm is one communicator, from its init to its finalize.
type comm struct {
	id        uint64
	commID    uint64
	name      string
	nNodes    int
	nRanks    int
	rank      int
	hookAsked bool // getDeviceHook gave it its context
}

func (c *comm) String() string {
	return fmt.Sprintf("comm %#x %q rank %d/%d", c.commID, c.name, c.rank, c.nRanks)
}

// init registers a communicator. The first one of the process reads the knobs
// and the profile and opens the outputs.
func (s *state) init(commID uint64, name string, nNodes, nRanks, rank int) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.setupDone {
		s.setupDone = true
		s.setup()
		if s.inactive == "" {
			if err := s.openOutputs(); err != nil {
				s.disableLocked(err.Error())
			}
		}
	}
	s.nextID++
	id := s.nextID
	c := &comm{id: id, commID: commID, name: name, nNodes: nNodes, nRanks: nRanks, rank: rank}
	s.comms[id] = c
	if s.inactive == "" {
		ncclLog(logInfo, fmt.Sprintf("ncclhooks: %s: profile %q (%d hooks), backend %s, output %s",
			c, s.profile.Name, len(s.module.Hooks), s.knobs.backend, s.jsonl.Path()))
	}
	return id
}

// setup reads the knobs and the profile and generates its source. Compiling
// waits for the first getDeviceHook: NCCL without the device hook never asks.
func (s *state) setup() {
	k, err := readKnobs()
	s.knobs = k
	if err != nil {
		s.disableLocked(err.Error())
		return
	}
	if k.profile == "" {
		// Loaded as NCCL's profiler but given nothing to do: say so once.
		s.disableLocked("NCCL_HOOKS_PROFILE is not set: the plugin is loaded but records nothing; set it to a hook profile (YAML)")
		return
	}
	p, err := config.Load(k.profile)
	if err != nil {
		s.disableLocked(fmt.Sprintf("profile not loaded (fix it, or unset NCCL_HOOKS_PROFILE):\n%v", err))
		return
	}
	m, err := hookgen.Generate(p)
	if err != nil {
		s.disableLocked(fmt.Sprintf("profile %s: %v", k.profile, err))
		return
	}
	s.profile, s.module = p, m
}

func (s *state) outputDir() string {
	if s.knobs.dumpDir != "" {
		return s.knobs.dumpDir
	}
	return s.profile.Output.DumpDir
}

// openOutputs starts the sinks and the drainer. They live as long as the
// process: totals stay cumulative over every init/finalize cycle, and the
// last finalize of a cycle settles them (a final dump, files flushed).
func (s *state) openOutputs() error {
	host, _ := os.Hostname()
	j, err := sinks.NewJSONL(s.outputDir(), sinks.Header{
		Profile:     s.profile.Name,
		ProfileFile: s.profile.File,
		Host:        host,
		PID:         os.Getpid(),
		Backend:     s.knobs.backend,
		Fields:      sinks.HeaderFields(s.module),
	})
	if err != nil {
		return fmt.Errorf("NCCL_HOOKS_DUMP_DIR / output.dump_dir: %v", err)
	}
	s.jsonl = j
	s.sinks = []sinks.Sink{j}
	if s.knobs.promDir != "" || s.knobs.promAddr != "" {
		p, err := sinks.NewProm(s.knobs.promDir, sinks.PromOptions{
			Addr:      s.knobs.promAddr,
			DumpStats: s.knobs.promDumpStats,
			Host:      host,
		})
		if err != nil {
			j.Close()
			return fmt.Errorf("NCCL_HOOKS_PROM_DIR / NCCL_HOOKS_PROM_ADDR: %v", err)
		}
		s.sinks = append(s.sinks, p)
	}
	s.drainer = rings.NewDrainer(rings.Options{
		DumpInterval: s.profile.Output.DumpInterval,
		RingCapacity: s.profile.Output.RingCapacity,
		Sink:         sinks.Multi(s.sinks...),
		FuncName:     s.funcName,
		Log:          ncclLog,
	})
	return nil
}

// addDevice starts draining a loaded device. It must happen before its
// hook reaches NCCL: the drain starts at the device's current head.
func (s *state) addDevice(d backend.Device) error {
	if host, dev, err := d.Clock(); err == nil {
		var model string
		if m, ok := d.(interface{ Model() string }); ok {
			model = m.Model()
		}
		s.jsonl.Clock(d.Ordinal(), model, host, dev)
	}
	return s.drainer.Add(d, s.module)
}

// deviceHook returns the hook and a context of its own for the communicator
// whose getDeviceHook this is, compiling the profile on first use and loading
// it once per device. commID is the communicator whose init ran last on the
// calling thread (0: none; then the oldest communicator still waiting for a
// hook is taken, so that a caller that asks from another thread still gets
// a distinct context per communicator).
func (s *state) deviceHook(ord int, commID uint64) (hook, ctx uintptr) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inactive != "" || s.module == nil {
		return 0, 0
	}
	c := s.comms[commID]
	if c == nil || c.hookAsked {
		c = s.waitingComm()
	}
	d, ok := s.devices[ord]
	if !ok {
		if d = s.loadDevice(ord); d == nil {
			return 0, 0
		}
	}
	index := s.commsOnDevice[ord]
	ctxIndex := index
	if s.knobs.sharedCtx {
		ctxIndex = 0
	}
	cctx, err := d.CommCtx(ctxIndex)
	if err != nil {
		// Only this communicator goes without a hook.
		ncclLog(logWarn, fmt.Sprintf("ncclhooks: device %d: no hook for communicator %d: %v", ord, index, err))
		return 0, 0
	}
	s.commsOnDevice[ord] = index + 1
	info := sinks.Comm{Device: ord, Index: index}
	desc := fmt.Sprintf("communicator %d", index) // getDeviceHook with no init before it
	if c != nil {
		c.hookAsked = true
		info.ID, info.Name, info.Rank, info.NRanks, info.NNodes = c.commID, c.name, c.rank, c.nRanks, c.nNodes
		desc = c.String()
	}
	if err := s.jsonl.Comm(info); err != nil {
		ncclLog(logWarn, fmt.Sprintf("ncclhooks: writing the comm line: %v", err))
	}
	ncclLog(logInfo, fmt.Sprintf("ncclhooks: %s: device %d, comm index %d, hook %#x ctx %#x", desc, ord, index, d.Entry(), cctx))
	return d.Entry(), cctx
}

// waitingComm is the oldest communicator that has not asked for a hook.
func (s *state) waitingComm() *comm {
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
func (s *state) loadDevice(ord int) backend.Device {
	if s.compiled == nil {
		start := time.Now()
		c, err := s.compile()
		if err != nil {
			s.disableLocked(err.Error())
			return nil
		}
		s.compiled = c
		ncclLog(logInfo, fmt.Sprintf("ncclhooks: compiled profile %q in %v: %s", s.profile.Name,
			time.Since(start).Round(time.Microsecond), c.Info()))
	}
	start := time.Now()
	d, err := s.compiled.Load(ord)
	if err != nil {
		s.disableLocked(fmt.Sprintf("device %d: %v", ord, err))
		return nil
	}
	if err := d.WriteFuncSets(s.funcSets()); err != nil {
		d.Close()
		s.disableLocked(fmt.Sprintf("device %d: function-name sets: %v", ord, err))
		return nil
	}
	if err := s.addDevice(d); err != nil {
		d.Close()
		s.disableLocked(fmt.Sprintf("device %d: %v", ord, err))
		return nil
	}
	s.devices[ord] = d
	var bufs []string
	for _, h := range s.module.Hooks {
		bufs = append(bufs, fmt.Sprintf("%s: %d slots x %d B, %s", h.Name, h.Slots, 8*h.Layout.SlotWords(), h.Overflow))
	}
	ncclLog(logInfo, fmt.Sprintf("ncclhooks: device %d loaded in %v, hook %#x; buffers: %s", ord,
		time.Since(start).Round(time.Microsecond), d.Entry(), strings.Join(bufs, "; ")))
	return d
}

func (s *state) compile() (backend.Compiled, error) {
	switch s.knobs.backend {
	case "cpu":
		// A cpu hook is a host function: only the ncclhooks harness can call
		// it. Handing it to real NCCL would crash its kernels.
		if !harnessPresent() {
			return nil, fmt.Errorf("NCCL_HOOKS_BACKEND=cpu: cpu hooks are host functions that only the ncclhooks harness can call; use gpu or auto")
		}
		return cpu.Compile(s.module, s.knobs.cc)
	case "gpu":
		return s.compileGPU()
	default: // auto
		c, err := s.compileGPU()
		if err != nil && harnessPresent() {
			ncclLog(logInfo, fmt.Sprintf("ncclhooks: no GPU backend (%v): using the cpu backend", err))
			s.knobs.backend = "cpu"
			return cpu.Compile(s.module, s.knobs.cc)
		}
		return c, err
	}
}

func (s *state) compileGPU() (backend.Compiled, error) {
	lib, err := nvrtc.Open()
	if err != nil {
		return nil, err
	}
	var cache *nvrtc.Cache
	if s.knobs.cacheDir != "off" {
		dir := s.knobs.cacheDir
		if dir == "" {
			dir = nvrtc.DefaultCacheDir()
		}
		if cache, err = nvrtc.OpenCache(dir); err != nil {
			ncclLog(logWarn, fmt.Sprintf("ncclhooks: compile cache disabled (NCCL_HOOKS_CACHE_DIR): %v", err))
			cache = nil
		}
	}
	s.knobs.backend = "gpu"
	c, err := gpu.Compile(s.module, lib, gpu.Options{Cache: cache, Budget: s.knobs.maxRegisters,
		Caps: s.knobs.registerCaps, Extra: strings.Fields(s.knobs.nvrtcOptions)})
	if err != nil {
		return nil, err
	}
	if refused := c.Refused(); len(refused) > 0 {
		// Only the hooks that could fault NCCL's kernels go: the others run.
		var lines []string
		for _, r := range refused {
			lines = append(lines, "  "+r.String())
			if err := s.jsonl.Refused(r.Hook, r.Pos.String(), r.Why); err != nil {
				ncclLog(logWarn, fmt.Sprintf("ncclhooks: writing the refused line: %v", err))
			}
		}
		ncclLog(logWarn, fmt.Sprintf("ncclhooks: %d of the profile's hooks are left out, the others run (simplify them: fewer fields, lets or aggregates; or split them):\n%s",
			len(refused), strings.Join(lines, "\n")))
		s.module = c.Module()
	}
	return c, nil
}

// funcSets resolves every name predicate of the profile into a set of
// function ids, from NCCL's function-name table.
func (s *state) funcSets() [][]uint32 {
	if s.names == nil {
		s.names = []string{}
		for id := 0; id < hookgen.FuncSetWords*32; id++ {
			n := funcName(uint32(id))
			if n == "" {
				break
			}
			s.names = append(s.names, n)
		}
		if len(s.module.FuncSets) > 0 && len(s.names) == 0 {
			ncclLog(logWarn, "ncclhooks: NCCL does not export ncclProfilerDevFuncName: name predicates (func matches ...) match nothing")
		}
	}
	sets := make([][]uint32, len(s.module.FuncSets))
	for i, fs := range s.module.FuncSets {
		bits := make([]uint32, hookgen.FuncSetWords)
		for id, n := range s.names {
			if fs.Pred.Match(n) {
				bits[id/32] |= 1 << (id % 32)
			}
		}
		sets[i] = bits
	}
	return sets
}

// funcName is the drainer's resolver: NCCL's name, or a numeric fallback.
func (s *state) funcName(id uint32) string {
	if int(id) < len(s.names) {
		return s.names[id]
	}
	if n := funcName(id); n != "" {
		return n
	}
	return fmt.Sprintf("func#%d", id)
}

// finalize unregisters a communicator; the last one settles the drain:
// everything that reached a buffer is in the outputs when it returns.
func (s *state) finalize(id uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.comms[id]
	if !ok {
		return
	}
	desc := c.String()
	delete(s.comms, id)
	if len(s.comms) > 0 || s.drainer == nil {
		return
	}
	sum := s.drainer.Settle()
	ncclLog(logInfo, fmt.Sprintf("ncclhooks: %s: last communicator finalized: %s; output %s", desc, sum, s.jsonl.Path()))
}

// disable makes the plugin inactive with one WARN.
func (s *state) disable(why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.disableLocked(why)
}

func (s *state) disableLocked(why string) {
	if s.inactive != "" {
		return
	}
	s.inactive = why
	ncclLog(logWarn, "ncclhooks: inactive: "+why)
}
