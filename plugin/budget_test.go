package main

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ncclhooks/ncclhooks/internal/gputest"
)

// TestNCCLLoadedWithLocalSymbols plays torch: NCCL is a library dlopened
// with local symbols (testdata/localnccl.c), where dlsym(RTLD_DEFAULT)
// finds neither ncclGetVersion nor ncclProfilerDevFuncName. The plugin
// still finds it (the library holding the logger init was given), its
// version, its device hook, and reads its .nv_fatbin (the ptxas fixture:
// kernels of 32 and 64 registers) for the budget.
func TestNCCLLoadedWithLocalSymbols(t *testing.T) {
	dir := t.TempDir()
	f, err := elf.Open("../internal/fatbin/testdata/ptxas/plain.so")
	if err != nil {
		t.Fatal(err)
	}
	sec, err := f.Section(".nv_fatbin").Data()
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	fb := filepath.Join(dir, "fixture.fatbin")
	if err := os.WriteFile(fb, sec, 0o600); err != nil {
		t.Fatal(err)
	}
	lib, bin := filepath.Join(dir, "liblocalnccl.so"), filepath.Join(dir, "localmain")
	for _, args := range [][]string{
		{"-shared", "-fPIC", "-O2", "-Wall", "-DFATBIN=\"" + fb + "\"", "-I../internal/abi", "-o", lib, "testdata/localnccl.c", "-ldl"},
		{"-O2", "-Wall", "-o", bin, "testdata/localmain.c", "-ldl"},
	} {
		if out, err := exec.Command("cc", args...).CombinedOutput(); err != nil {
			t.Fatalf("cc %v: %v\n%s", args, err, out)
		}
	}
	cmd := exec.Command(bin, lib, pluginPath)
	cmd.Env = append(os.Environ(), "NCCL_HOOKS_PROFILE=../examples/latency.yaml", "NCCL_HOOKS_DUMP_DIR="+dir, "NCCL_HOOKS_CACHE_DIR=off")
	b, err := cmd.CombinedOutput()
	out := string(b)
	if err != nil || !strings.Contains(out, "DONE") {
		t.Fatalf("localmain: %v\n%s", err, out)
	}
	if strings.Contains(out, "version unknown") {
		t.Errorf("the plugin did not find NCCL's version:\n%s", out)
	}
	if !strings.Contains(out, "ncclhooks: NCCL 2.30.7 loaded ncclProfiler_v7: the hooks run in NCCL's kernels (device hook") {
		t.Errorf("the plugin did not find NCCL's device hook (ncclProfilerDevFuncName):\n%s", out)
	}
	budget := ""
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "ncclhooks: NCCL 2.30.7 at "+lib+": ") {
			budget = l
		}
	}
	switch {
	case strings.Contains(budget, ": 2 kernels call the hook, 32-64 registers (fewest: fixture_r32), stack 368-600 B: hooks built for at most 32 registers"):
		t.Logf("%s", budget)
	case strings.Contains(budget, "its kernels cannot be read: no CUDA device to read them for") && !gputest.Required():
		t.Logf("no CUDA device: %s", budget)
	default:
		t.Errorf("no budget line for %s with its 32-register kernels:\n%s", lib, out)
	}
}
