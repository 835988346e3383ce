package lifecycle_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ncclhooks/ncclhooks/internal/lifecycle"
)

// The ptxas fixtures of package fatbin: kernels of 32 and 64 registers.
var (
	fixturePlain, _ = filepath.Abs("../fatbin/testdata/ptxas/plain.so")
	fixturePTX, _   = filepath.Abs("../fatbin/testdata/ptxas/ptx.so")
)

// budgetSession inits one communicator of a session whose NCCL is lib and
// returns its budget and what it logged.
func budgetSession(t *testing.T, k lifecycle.Knobs, lib lifecycle.NCCLLibrary, version int, hostOnly bool) (budget, read int, l *logs) {
	t.Helper()
	dir := t.TempDir()
	prof := filepath.Join(dir, "p.yaml")
	if err := os.WriteFile(prof, []byte("version: 1\nname: p\noutput: {dump_interval: 1h}\nhooks:\n  - name: all\n    fields: [timestamp, phase]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	k.Profile, k.DumpDir, k.CacheDir, k.CC = prof, dir, "off", "cc"
	if k.Backend == "" {
		k.Backend = "gpu"
	}
	l = &logs{}
	s := lifecycle.New(lifecycle.Env{
		Log:            l.log,
		FuncName:       func(uint32) string { return "" },
		Knobs:          func() (lifecycle.Knobs, error) { return k, nil },
		HarnessPresent: func() bool { return false },
		DeviceHookNCCL: func() bool { return !hostOnly },
		NCCLVersion:    func() int { return version },
		NCCLLibrary:    func() lifecycle.NCCLLibrary { return lib },
		DeviceArch:     func(int) (string, error) { return "sm_90", nil },
	})
	id := s.Init(1, "c", 1, 1, 0, 7)
	s.Finalize(id)
	budget, read = s.Budget()
	return budget, read, l
}

func line(l *logs, tag, part string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.lines {
		if strings.HasPrefix(s, tag+" ") && strings.Contains(s, part) {
			return s
		}
	}
	return ""
}

// TestBudgetFromTheCallersLibrary: the budget is the fewest registers of
// the kernels that call the hook, in the library that exports
// ncclProfilerDevFuncName, said in one INFO line.
func TestBudgetFromTheCallersLibrary(t *testing.T) {
	budget, read, l := budgetSession(t, lifecycle.Knobs{}, lifecycle.NCCLLibrary{Path: "/x/caller", HookPath: fixturePlain}, 0, false)
	want := "INFO ncclhooks: plain.so (no ncclGetVersion: not NCCL) at " + fixturePlain +
		": 2 kernels call the hook, 32-64 registers (fewest: fixture_r32), stack 368-600 B: hooks built for at most 32 registers; read in "
	if budget != 32 || read != 32 || !strings.HasPrefix(line(l, "INFO", " at "), want) {
		t.Fatalf("budget %d (read %d), want 32; log:\n%s\nwant a line\n%s", budget, read, strings.Join(l.lines, "\n"), want)
	}
	if l.count("WARN") != 0 {
		t.Errorf("WARN logged:\n%s", strings.Join(l.lines, "\n"))
	}
}

// TestBudgetOverride: NCCL_HOOKS_MAX_REGISTERS wins, with a WARN where it
// exceeds what the kernels have, and silently where it does not.
func TestBudgetOverride(t *testing.T) {
	lib := lifecycle.NCCLLibrary{HookPath: fixturePlain}
	budget, read, l := budgetSession(t, lifecycle.Knobs{MaxRegisters: 48}, lib, 23007, false)
	w := line(l, "WARN", "NCCL_HOOKS_MAX_REGISTERS=48 exceeds the 32 registers of the kernels that call the hook (NCCL 2.30.7 at "+fixturePlain+")")
	if budget != 48 || read != 32 || w == "" || line(l, "INFO", "hooks built for at most 48 registers (NCCL_HOOKS_MAX_REGISTERS)") == "" {
		t.Fatalf("budget %d read %d; log:\n%s", budget, read, strings.Join(l.lines, "\n"))
	}
	budget, _, l = budgetSession(t, lifecycle.Knobs{MaxRegisters: 24}, lib, 23007, false)
	if budget != 24 || l.count("WARN") != 0 {
		t.Fatalf("budget %d; log:\n%s", budget, strings.Join(l.lines, "\n"))
	}
}

// TestBudgetUnreadable: PTX only, no library found, no device: NCCL gets
// the conservative budget, a library that is not NCCL the smallest, and the
// line says why.
func TestBudgetUnreadable(t *testing.T) {
	budget, _, l := budgetSession(t, lifecycle.Knobs{}, lifecycle.NCCLLibrary{HookPath: fixturePTX}, 23007, false)
	if budget != lifecycle.ConservativeRegisterBudget ||
		line(l, "INFO", "NCCL 2.30.7 at "+fixturePTX+": its sm_90 kernels cannot be read: no cubin for sm_90; PTX for sm_90, compiled by the driver at load: hooks built for at most 96 registers, the fewest NCCL's kernels have shipped with") == "" {
		t.Fatalf("budget %d; log:\n%s", budget, strings.Join(l.lines, "\n"))
	}
	budget, _, l = budgetSession(t, lifecycle.Knobs{}, lifecycle.NCCLLibrary{HookPath: fixturePTX}, 0, false)
	if budget != 24 || line(l, "INFO", "the fewest any hook needs") == "" {
		t.Fatalf("not NCCL: budget %d; log:\n%s", budget, strings.Join(l.lines, "\n"))
	}
	budget, _, l = budgetSession(t, lifecycle.Knobs{}, lifecycle.NCCLLibrary{Why: "dladdr found nothing"}, 23007, false)
	if budget != 96 || line(l, "INFO", "NCCL 2.30.7: its kernels cannot be read: the library was not found (dladdr found nothing)") == "" {
		t.Fatalf("no library: budget %d; log:\n%s", budget, strings.Join(l.lines, "\n"))
	}
	for _, s := range l.lines {
		if strings.Contains(s, "version unknown") {
			t.Errorf("logged %q", s)
		}
	}
}

// TestBudgetReleasedNCCL: NCCL without the device hook (torch's wheel):
// its version and kernels in the line, the hooks on host events.
func TestBudgetReleasedNCCL(t *testing.T) {
	_, read, l := budgetSession(t, lifecycle.Knobs{Backend: "auto"}, lifecycle.NCCLLibrary{Path: fixturePlain}, 22809, true)
	want := "NCCL 2.28.9 at " + fixturePlain + ": 2 kernels would call a device hook (this NCCL has none), 32-64 registers (fewest: fixture_r32), stack 368-600 B: the hooks run on host events"
	if read != 32 || line(l, "INFO", want) == "" {
		t.Fatalf("read %d; log:\n%s\nwant a line with\n%s", read, strings.Join(l.lines, "\n"), want)
	}
}
