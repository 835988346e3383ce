package lifecycle

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ncclhooks/ncclhooks/internal/backend/gpu"
	"github.com/ncclhooks/ncclhooks/internal/cuda"
	"github.com/ncclhooks/ncclhooks/internal/fatbin"
)

// NCCLLibrary is where the NCCL that called init lives, and which library's
// kernels call the device hook.
type NCCLLibrary struct {
	Path string // the library that called init (NCCL: the one holding its logger); "" unknown
	Why  string // why Path is empty (or could not be opened)
	// HookPath is the library that exports ncclProfilerDevFuncName, whose
	// kernels call the hook; "" when none does (NCCL without the device hook).
	HookPath string
}

// ConservativeRegisterBudget is the budget where the kernels that call the
// hook cannot be read (compressed in an unknown format, PTX only, stripped,
// no library found) in a library that is NCCL: the fewest registers NCCL's
// collective kernels have shipped with. Every NCCL release builds them with
// -maxrregcount=96 (makefiles/common.mk, src/device/Makefile), and they use
// all 96 (gpu.DefaultRegisterBudget). A custom build with a lower cap is
// what reading the fatbin exists for; where that fails, this is the line the
// INFO message names, and NCCL_HOOKS_MAX_REGISTERS sets it.
const ConservativeRegisterBudget = gpu.DefaultRegisterBudget

// foreignBudget is the budget where the kernels of a library that is not
// NCCL (it has no ncclGetVersion) but exports ncclProfilerDevFuncName cannot
// be read: nothing is known of them, so only the smallest hooks run.
const foreignBudget = gpu.MinRegisterBudget

// budgetWait bounds how long the first getDeviceHook waits for the budget
// (a library on hung storage): then it takes the conservative one.
const budgetWait = 10 * time.Second

// budgetResult is what readBudget found.
type budgetResult struct {
	budget, read int // read: the kernels' fewest registers (0: not read)
}

// startBudget reads the budget in the background, so that NCCL's init does
// not wait for it (NCCL's cubins for one architecture are tens of MB to
// decompress); the first getDeviceHook (compileGPU) and the last finalize
// wait for it (waitBudget).
func (s *Session) startBudget() {
	ch := make(chan budgetResult, 1)
	s.budgetCh = ch
	k, host := s.knobs, s.host
	go func() {
		r := budgetResult{budget: ConservativeRegisterBudget}
		defer func() {
			if p := recover(); p != nil {
				s.env.Log(LogWarn, fmt.Sprintf("ncclhooks: internal error reading the register budget (%v): hooks built for at most %d registers", p, r.budget))
			}
			ch <- r
		}()
		r = s.readBudget(k, host)
	}()
}

// waitBudget takes the budget startBudget read into the session (s.mu
// held), waiting for it at most budgetWait.
func (s *Session) waitBudget() {
	if s.budgetCh == nil || s.budgetGot {
		return
	}
	timer := time.NewTimer(budgetWait)
	defer timer.Stop()
	select {
	case r := <-s.budgetCh:
		s.budget, s.budgetRead = r.budget, r.read
	case <-timer.C:
		s.budget = ConservativeRegisterBudget
		if s.knobs.MaxRegisters > 0 {
			s.budget = s.knobs.MaxRegisters
		}
		s.env.Log(LogWarn, fmt.Sprintf("ncclhooks: reading the register budget from NCCL's kernels took over %v: hooks built for at most %d registers", budgetWait, s.budget))
	}
	s.budgetGot = true
}

// readBudget finds how many registers the kernels that call the hook have,
// from the library's .nv_fatbin (package fatbin), for device 0's
// architecture (the one the module is compiled for first), and logs it in
// one INFO line; NCCL_HOOKS_MAX_REGISTERS (k) overrides it, with a WARN
// where it exceeds what was read. Nothing here disables the plugin: a
// failure gives the conservative budget and says why. It runs on its own
// goroutine and touches no session state but env.
func (s *Session) readBudget(k Knobs, host bool) budgetResult {
	lib := s.env.NCCLLibrary()
	version := s.env.NCCLVersion()
	harness := s.env.HarnessPresent()
	name := s.ncclName(lib)
	path, calls := lib.HookPath, true
	if path == "" {
		path, calls = lib.Path, false
	}
	fallback := ConservativeRegisterBudget
	if version == 0 && lib.HookPath != "" && !harness {
		fallback = foreignBudget
	}
	r := budgetResult{budget: fallback}
	start := time.Now()
	what, read := s.kernelsOf(path, lib.Why, calls)
	took := time.Since(start).Round(time.Microsecond)
	if read > 0 {
		r = budgetResult{budget: read, read: read}
	}
	how := fmt.Sprintf("hooks built for at most %d registers", r.budget)
	if read == 0 {
		how = fmt.Sprintf("hooks built for at most %d registers, %s (NCCL_HOOKS_MAX_REGISTERS sets it)", r.budget, fallbackWhy(fallback))
	}
	if n := k.MaxRegisters; n > 0 {
		if read > 0 && n > read {
			s.env.Log(LogWarn, fmt.Sprintf("ncclhooks: NCCL_HOOKS_MAX_REGISTERS=%d exceeds the %d registers of the kernels that call the hook (%s at %s): a hook that uses more than %d faults them",
				n, read, name, path, read))
		}
		r.budget = n
		how = fmt.Sprintf("hooks built for at most %d registers (NCCL_HOOKS_MAX_REGISTERS)", n)
	}
	if host {
		how = "the hooks run on host events"
	}
	at := ""
	if path != "" {
		at = " at " + path
	}
	s.env.Log(LogInfo, fmt.Sprintf("ncclhooks: %s%s: %s: %s; read in %v", name, at, what, how, took))
	return r
}

// ncclName names the NCCL that called init: "NCCL 2.30.7", "the ncclhooks
// harness", or the library whose kernels call the hook where it is not NCCL
// (it has no ncclGetVersion).
func (s *Session) ncclName(lib NCCLLibrary) string {
	version := s.env.NCCLVersion()
	switch {
	case version > 0:
		return fmt.Sprintf("NCCL %d.%d.%d", version/10000, version/100%100, version%100)
	case s.env.HarnessPresent():
		return "the ncclhooks harness"
	case lib.HookPath != "":
		return filepath.Base(lib.HookPath) + " (no ncclGetVersion: not NCCL)"
	}
	return "NCCL (version unknown)"
}

func fallbackWhy(budget int) string {
	if budget == ConservativeRegisterBudget {
		return "the fewest NCCL's kernels have shipped with"
	}
	return "the fewest any hook needs: nothing is known of these kernels"
}

// kernelsOf describes the kernels of the library at path that call the
// hook (calls) or would call one (NCCL without the device hook), and
// returns the fewest registers among them: 0 where they cannot be read.
func (s *Session) kernelsOf(path, why string, calls bool) (string, int) {
	if path == "" {
		if why == "" {
			why = "not found"
		}
		return "its kernels cannot be read: the library was not found (" + why + ")", 0
	}
	major, minor, arch, err := s.deviceArch()
	if err != nil {
		return fmt.Sprintf("its kernels cannot be read: %v", err), 0
	}
	lib, err := fatbin.ReadLibrary(path, major, minor)
	switch {
	case errors.Is(err, fatbin.ErrNoFatbin) && s.env.HarnessPresent():
		// The harness compiles its kernels at run time (NVRTC), each given
		// NCCL's register count (harness/gpuharness, hookRegisters).
		return fmt.Sprintf("its kernels are compiled at run time (NVRTC) with %d registers each", gpu.DefaultRegisterBudget), gpu.DefaultRegisterBudget
	case err != nil:
		return fmt.Sprintf("its %s kernels cannot be read: %v", arch, err), 0
	}
	b := fatbin.BudgetOf(fatbin.HookCallers(lib.Kernels))
	if b.Kernels == 0 {
		return fmt.Sprintf("its %s cubins have no kernels", arch), 0
	}
	desc := b.String()
	if !calls {
		desc = strings.Replace(desc, "call the hook", "would call a device hook (this NCCL has none)", 1)
		desc = strings.Replace(desc, "calls the hook", "would call a device hook (this NCCL has none)", 1)
	}
	if lib.PTXOnly > 0 {
		desc += fmt.Sprintf(" (%d of %d fat binaries have only PTX for %s, compiled by the driver at load: their kernels are not counted)", lib.PTXOnly, lib.Containers, arch)
	}
	return desc, b.MinRegisters
}

// deviceArch is device 0's compute capability.
func (s *Session) deviceArch() (major, minor int, arch string, err error) {
	if s.env.DeviceArch != nil {
		arch, err = s.env.DeviceArch(0)
	} else {
		var lib *cuda.Lib
		if lib, err = cuda.Open(); err == nil {
			arch, err = lib.DeviceArch(0)
		}
	}
	if err != nil {
		return 0, 0, "", fmt.Errorf("no CUDA device to read them for: %w", err)
	}
	n, err := strconv.Atoi(strings.TrimPrefix(arch, "sm_"))
	if err != nil || n < 10 {
		return 0, 0, "", fmt.Errorf("device 0's architecture %q is not sm_XY", arch)
	}
	return n / 10, n % 10, arch, nil
}
