package lifecycle

// reload.go is the live profile reload (NCCL_HOOKS_RELOAD;
// docs/ARCHITECTURE.md, "Live profile reload"): the profile file watched on
// a goroutine of the plugin's own, a changed profile validated, generated
// and compiled there, off NCCL's threads, then loaded on every device and
// swapped in through the switch, whose entry and slots are what NCCL holds.

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/ncclhooks/ncclhooks/internal/backend"
	"github.com/ncclhooks/ncclhooks/internal/backend/cpu"
	"github.com/ncclhooks/ncclhooks/internal/backend/gpu"
	"github.com/ncclhooks/ncclhooks/internal/config"
	"github.com/ncclhooks/ncclhooks/internal/hookgen"
	"github.com/ncclhooks/ncclhooks/internal/rings"
	"github.com/ncclhooks/ncclhooks/internal/sinks"
)

// DefaultReloadInterval is how often NCCL_HOOKS_RELOAD=on looks at the
// profile file: one stat(2) per look.
const DefaultReloadInterval = 250 * time.Millisecond

// ReloadGrace is how long the previous module's drain goes on after the
// switch before its final dump: a call that read its slot just before the
// switch finishes in the previous module within microseconds on the GPU, and
// within this even for a cpu thread preempted inside the hook (the torn
// timeout, twice: what the drain already allows a writer).
const ReloadGrace = 2 * rings.DefaultTornTimeout

// slot is one communicator's switch slot: the devCtx NCCL holds.
type slot struct {
	addr  uintptr
	index int   // the communicator's index on the device (its blocks' headers name it)
	c     *comm // nil: a getDeviceHook with no init before it (never finalized)
	// blk is the context block it names in the active module (its slot
	// there; -1: NCCL_HOOKS_SHARED_CTX's block 0).
	blk int
}

// fileStat is what the watcher compares: a change of any is a reload.
type fileStat struct {
	ino, dev  uint64
	size      int64
	mtimeNs   int64
	ctimeNs   int64
	missing   bool
	statError string
}

func statProfile(path string) fileStat {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStat{missing: errors.Is(err, os.ErrNotExist), statError: err.Error()}
	}
	st := fileStat{size: fi.Size(), mtimeNs: fi.ModTime().UnixNano()}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.ino, st.dev = sys.Ino, uint64(sys.Dev)
		st.ctimeNs = sys.Ctim.Nano()
	}
	return st
}

// startWatch starts the watcher when NCCL_HOOKS_RELOAD asks for it (s.mu
// held, at the first init, once the outputs are open).
func (s *Session) startWatch() {
	if s.knobs.Reload <= 0 || s.inactive != "" || s.watching {
		return
	}
	if s.host {
		s.env.Log(LogWarn, "ncclhooks: NCCL_HOOKS_RELOAD is ignored with NCCL's host events (NCCL_HOOKS_SOURCE=host): their hooks are called from the plugin's own C code, which has no switch; the profile stays as loaded")
		return
	}
	s.watching = true
	path, every := s.knobs.Profile, s.knobs.Reload
	first := statProfile(path)
	s.env.Log(LogInfo, fmt.Sprintf("ncclhooks: watching %s every %v for a new profile (NCCL_HOOKS_RELOAD; `ncclhooks reload PID [PROFILE]` writes one): the hook handed to NCCL is the switch, which calls the active profile's", path, every))
	go s.watch(path, every, first)
}

// watch looks at the profile file every interval for the life of the
// process and reloads it when its inode, size or times change.
func (s *Session) watch(path string, every time.Duration, last fileStat) {
	t := time.NewTicker(every)
	defer t.Stop()
	for range t.C {
		st := statProfile(path)
		if st == last {
			continue
		}
		last = st
		if st.statError != "" {
			continue // removed or unreadable: the next file written there is looked at
		}
		s.reloadSafe(time.Now(), time.Unix(0, st.mtimeNs))
	}
}

// reloadSafe is Reload on the watcher: a panic must not end the job.
func (s *Session) reloadSafe(seen, changed time.Time) {
	defer func() {
		if r := recover(); r != nil {
			s.env.Log(LogWarn, fmt.Sprintf("ncclhooks: reload panicked (%v): the running profile stays active", r))
		}
	}()
	s.Reload(seen, changed)
}

// ReloadResult says what a Reload did.
type ReloadResult struct {
	Epoch     int           // the epoch now active (unchanged when nothing was swapped)
	Swapped   bool          // a new profile is active
	Reason    string        // why not, when not swapped ("" when it was)
	Compile   time.Duration // load, generate and compile
	Swap      time.Duration // load on the devices and switch
	Wait      time.Duration // of Swap: waiting for the session's lock (an init, a finalize)
	Load      time.Duration // of Swap: loading the module and its blocks on every device
	Set       time.Duration // of Swap: writing the switch's pairs and slots
	Active    time.Time     // when the switch took effect
	Previous  rings.Summary // the previous epoch's final totals
	Unchanged bool          // the file holds the active profile (same hash)
}

// Reload reads the profile file again and, when it holds a different
// profile that loads, generates and compiles, makes it the active one on
// every device; otherwise the running profile stays, with one WARN per
// failing version naming the file:line:col of each error. seen is when the
// change was noticed, changed the file's modification time (the profile
// line's change_unix_ns). Reloads are serialised; NCCL's threads never wait
// for one but for the switch's stores, and a finalize for the previous
// epoch's final dump.
func (s *Session) Reload(seen, changed time.Time) ReloadResult {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	start := time.Now()

	s.mu.Lock()
	if s.inactive != "" || s.jsonl == nil || s.module == nil {
		s.mu.Unlock()
		return ReloadResult{Reason: "the plugin is inactive"}
	}
	knobs, activeHash, activeName, epoch := s.knobs, s.profile.Hash, s.profile.Name, s.epoch
	loaded := len(s.devices) > 0
	budget := s.knobs.MaxRegisters
	if s.budgetGot && s.budget > 0 {
		budget = s.budget
	}
	s.mu.Unlock()

	res := ReloadResult{Epoch: epoch}
	keep := fmt.Sprintf("the running profile %q stays active", activeName)
	p, err := config.Load(knobs.Profile)
	if err != nil {
		res.Reason = s.warnReload(err.Error(), fmt.Sprintf("ncclhooks: reload: %s does not load, %s (fix it and save again):\n%v", knobs.Profile, keep, err))
		return res
	}
	if p.Hash == activeHash {
		res.Unchanged, res.Reason = true, "unchanged"
		return res
	}
	fail := func(err error) ReloadResult {
		res.Reason = s.warnReload(p.Hash, fmt.Sprintf("ncclhooks: reload: %s (sha256 %.12s): %s:\n%v", knobs.Profile, p.Hash, keep, err))
		return res
	}
	if err := reloadable(p); err != nil {
		return fail(err)
	}
	m, err := hookgen.Generate(p)
	if err != nil {
		return fail(err)
	}
	var c backend.Compiled
	var refused []gpu.Refusal
	if loaded {
		switch knobs.Backend {
		case "cpu":
			c, err = cpu.Compile(m, knobs.CC, knobs.CCTimeout)
		case "gpu":
			var g *gpu.Compiled
			var cacheErr error
			g, cacheErr, err = gpu.Open(m, knobs.CacheDir, gpu.Options{Budget: budget, Caps: knobs.RegisterCaps, Extra: strings.Fields(knobs.NVRTCOptions)})
			s.mu.Lock()
			s.warnCache(cacheErr)
			s.mu.Unlock()
			if err == nil {
				c, refused, m = g, g.Refused(), g.Module()
				if len(m.Hooks) == 0 {
					err = errors.New("every hook of the profile could fault NCCL's kernels (section \"Safe for every caller\"): nothing would run")
				}
			}
		default:
			err = fmt.Errorf("backend %q has no switch", knobs.Backend)
		}
		if err != nil {
			return fail(err)
		}
	}
	res.Compile = time.Since(start)

	// Load and switch under the session's lock: no communicator joins
	// between the devices loaded and the slots switched.
	swapStart := time.Now()
	s.mu.Lock()
	res.Wait = time.Since(swapStart)
	if s.inactive != "" {
		s.mu.Unlock()
		res.Reason = "the plugin went inactive"
		return res
	}
	gate := sinks.NewGate(sinks.Multi(s.sinks...))
	dr := s.newDrainer(p, gate)
	newDevs := map[int]backend.Device{}
	undo := func(err error) ReloadResult {
		dr.Close()
		for _, d := range newDevs {
			d.Close() // never handed out
		}
		s.mu.Unlock()
		gate.Open()
		return fail(err)
	}
	if loaded && s.sw == nil {
		return undo(errors.New("the hook handed to NCCL is not the switch"))
	}
	if s.unswitched {
		return undo(errors.New("a communicator was handed the module's own entry (its switch slot failed): it would keep calling the running module after its drain ends"))
	}
	type flip struct {
		ord                int
		slot               *slot
		blk                int // its block in the new module
		entry, ctx         uintptr
		prevEntry, prevCtx uintptr
	}
	var flips []flip
	shared := s.knobs.SharedCtx && !m.Work
	loadStart := time.Now()
	for ord, old := range s.devices {
		d, err := LoadDevice(c, m, ord, s.names(), dr, s.jsonl.Clock)
		if err != nil {
			return undo(err)
		}
		newDevs[ord] = d
		// Each live communicator gets a block in the new module, naming
		// its index; the finalized ones have no switch slot left.
		for _, sl := range s.slots[ord] {
			ctx, blk := uintptr(0), -1
			if shared {
				ctx, err = d.CommCtx(0)
			} else {
				blk, ctx, err = d.NewComm(sl.index)
			}
			if err != nil {
				return undo(fmt.Errorf("device %d: %w", ord, err))
			}
			prevCtx, _ := old.CommCtx(max(sl.blk, 0))
			flips = append(flips, flip{ord: ord, slot: sl, blk: blk, entry: d.Entry(), ctx: ctx, prevEntry: old.Entry(), prevCtx: prevCtx})
		}
	}
	res.Load = time.Since(loadStart)
	setStart := time.Now()
	for i, f := range flips {
		if err := s.sw.Set(f.ord, f.slot.addr, f.entry, f.ctx); err != nil {
			for _, b := range flips[:i] { // back to the running module, whose drain goes on
				s.sw.Set(b.ord, b.slot.addr, b.prevEntry, b.prevCtx)
			}
			return undo(fmt.Errorf("device %d: switching: %w", f.ord, err))
		}
	}
	for _, f := range flips {
		// The blocks in the previous module stay as they are (it is never
		// closed); a finalize now releases the new module's.
		f.slot.blk = f.blk
		if f.slot.c != nil {
			f.slot.c.blk = f.blk
		}
	}
	active := time.Now()
	res.Set = active.Sub(setStart)
	old := s.drainer
	for _, d := range s.devices {
		// Never closed: a call that read its slot before the switch may
		// still be in the module (backend.Switch).
		s.retiredDevices = append(s.retiredDevices, d)
	}
	s.devices, s.drainer, s.profile, s.module = newDevs, dr, p, m
	s.live.Store(dr)
	if c != nil {
		s.compiled = c
	} else {
		s.compiled = nil // nothing loaded yet: the first getDeviceHook compiles this one
	}
	if g, ok := c.(*gpu.Compiled); ok {
		s.gpu = g
	}
	s.epoch++
	epoch = s.epoch
	s.mu.Unlock()
	res.Swap = time.Since(swapStart)
	res.Active, res.Epoch, res.Swapped = active, epoch, true

	// The previous module's last calls land, then its final dump, then the
	// profile line, then the new epoch's lines.
	time.Sleep(ReloadGrace)
	res.Previous = old.Close()
	err = s.jsonl.Epoch(sinks.Epoch{Epoch: epoch, Profile: p.Name, ProfileFile: p.File, ProfileHash: p.Hash,
		ActiveUnixNs: active.UnixNano(), ChangeUnixNs: changed.UnixNano(), Fields: sinks.HeaderFields(m), Drained: sinks.HeaderDrained(m)})
	if err != nil {
		s.env.Log(LogWarn, fmt.Sprintf("ncclhooks: reload: writing the profile line: %v", err))
	}
	s.refusedLines(refused)
	if err := gate.Open(); err != nil {
		s.env.Log(LogWarn, fmt.Sprintf("ncclhooks: reload: writing the records epoch %d's hooks made during the switch: %v", epoch, err))
	}
	s.env.Log(LogInfo, fmt.Sprintf("ncclhooks: reload: profile %q (%s, sha256 %.12s) active as epoch %d on %d device(s), %v after the change was seen (compiled in %v, switched in %v: the session's lock waited for %v, loaded in %v, %d slot(s) set in %v); epoch %d's final dump: %s",
		p.Name, p.File, p.Hash, epoch, len(newDevs), active.Sub(seen).Round(time.Microsecond), res.Compile.Round(time.Microsecond),
		res.Swap.Round(time.Microsecond), res.Wait.Round(time.Microsecond), res.Load.Round(time.Microsecond), len(flips), res.Set.Round(time.Microsecond), epoch-1, res.Previous))
	return res
}

// reloadable refuses what the switch cannot take in mid-run.
func reloadable(p *config.Profile) error {
	for _, h := range p.EnabledHooks() {
		if h.Buffer.Positions == config.PositionsWork {
			return fmt.Errorf("%s: hook %q: buffer.positions: work cannot be reloaded into a running job: its regions' drain starts at NCCL's first work item, and the work counters are far past it (restart the job with this profile, or use shared positions)", h.Pos, h.Name)
		}
	}
	return nil
}

// warnReload logs a failed reload once per failing version (key), and
// returns the message.
func (s *Session) warnReload(key, msg string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reloadWarned != key {
		s.reloadWarned = key
		s.env.Log(LogWarn, msg)
	}
	return msg
}

// refusedLines writes a refused line per hook the GPU left out, with one
// WARN, as at the first compile.
func (s *Session) refusedLines(refused []gpu.Refusal) {
	if len(refused) == 0 {
		return
	}
	var lines []string
	for _, r := range refused {
		lines = append(lines, "  "+r.String())
		if err := s.jsonl.Refused(r.Hook, r.Pos.String(), r.Why); err != nil {
			s.env.Log(LogWarn, fmt.Sprintf("ncclhooks: writing the refused line: %v", err))
		}
	}
	s.env.Log(LogWarn, fmt.Sprintf("ncclhooks: reload: %d of the profile's hooks are left out, the others run:\n%s", len(refused), strings.Join(lines, "\n")))
}

// switchHook hands communicator index on device ord a slot of the switch
// that calls the active module's entry with its context block (s.mu held).
// ok false: the switch could not be had; the module's own entry is handed
// out instead, and the process cannot reload (one WARN).
func (s *Session) switchHook(ord, index, blk int, c *comm, entry, ctx uintptr) (uintptr, uintptr) {
	if s.unswitched {
		return entry, ctx // said once: this process keeps its profile
	}
	if s.sw == nil && !s.switchFailed {
		var err error
		switch s.knobs.Backend {
		case "cpu":
			s.sw = cpu.Switch{}
		case "gpu":
			s.sw, err = gpu.NewSwitch(s.gpu, s.env.HarnessPresent())
		default:
			err = fmt.Errorf("backend %q has no switch", s.knobs.Backend)
		}
		if err != nil {
			s.switchFailed = true
			s.env.Log(LogWarn, fmt.Sprintf("ncclhooks: NCCL_HOOKS_RELOAD: no switch, so the profile cannot be reloaded in this process (NCCL gets the module's own entry): %v", err))
		}
	}
	if s.sw == nil {
		s.unswitched = true
		return entry, ctx
	}
	sw, err := s.sw.Entry(ord)
	var sl uintptr
	if free := s.freeSlots[ord]; err == nil && len(free) > 0 {
		// A finalized communicator's: NCCL calls it no more.
		sl, s.freeSlots[ord] = free[len(free)-1], free[:len(free)-1]
	} else if err == nil {
		sl, err = s.sw.NewSlot(ord)
	}
	if err == nil {
		err = s.sw.Set(ord, sl, entry, ctx)
	}
	if err != nil {
		s.unswitched = true
		s.env.Log(LogWarn, fmt.Sprintf("ncclhooks: device %d: communicator %d gets the module's own entry, and the profile can no longer be reloaded in this process: %v", ord, index, err))
		return entry, ctx
	}
	if !s.switchLogged[ord] {
		if s.switchLogged == nil {
			s.switchLogged = map[int]bool{}
		}
		s.switchLogged[ord] = true
		how := "a host function of the plugin"
		if g, ok := s.sw.(*gpu.Switch); ok {
			if r, ok := g.Resources(ord); ok {
				how = r.String()
			}
		}
		s.env.Log(LogInfo, fmt.Sprintf("ncclhooks: device %d: reload switch at %#x (%s): NCCL gets it and a slot per communicator; each call loads its slot, then the active pair, and calls that module's entry (NCCL_HOOKS_RELOAD)", ord, sw, how))
	}
	x := &slot{addr: sl, index: index, c: c, blk: blk}
	s.slots[ord] = append(s.slots[ord], x)
	if c != nil {
		c.sw = x
	}
	return sw, sl
}
