package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/ncclhooks/ncclhooks/internal/cuda"
)

// The plugin's life as NCCL orders it, and the process events of a job
// (fork, dlclose and reload), through the real .so and the C driver.

const exactProfile = "version: 1\nname: life\noutput: {dump_interval: 20ms, ring_capacity: 1048576}\nhooks:\n  - name: all\n    fields: [workCounter, channelId, phase]\n    buffer: {slots: 65536}\n"

// exact checks that every device's final dump counts exactly what the
// driver emitted, that the file holds every record it counts, and that
// there is one final dump per cycle.
func exact(t *testing.T, r *driverRun, o *output, devs, cycles int) {
	t.Helper()
	for d := 0; d < devs; d++ {
		k := fmt.Sprint("all ", d)
		st := o.final[k]
		if st.Matched != r.emitted[d] || st.Records != st.Matched || st.Pending != 0 || uint64(o.records[k]) != st.Records {
			t.Errorf("%s: final %+v, %d record lines, emitted %d", k, st, o.records[k], r.emitted[d])
		}
		if o.finals[k] != cycles {
			t.Errorf("%s: %d final dumps, want one per cycle (%d)", k, o.finals[k], cycles)
		}
	}
}

// A finalize that is not the last leaves the outputs alone: device 0's
// communicators are finalized while device 1's threads keep emitting, and
// only the last finalize of a cycle writes the final dump, exact for both.
func TestNonLastFinalizeDoesNotSettle(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	prof := writeProfile(t, dir, exactProfile)
	r := runDriver(t, []string{"NCCL_HOOKS_PROFILE=" + prof, "NCCL_HOOKS_BACKEND=cpu", "NCCL_HOOKS_DUMP_DIR=" + out, "CDRIVER_STAGGER=1"}, 2, 2, 2, 1000, 2)
	if len(r.warns) != 0 || !strings.Contains(r.out, "FINALIZED 1 0") {
		t.Fatalf("WARNs %q:\n%s", r.warns, r.out)
	}
	exact(t, r, readOutput(t, out), 2, 2)
}

// A device whose module does not load (here: a file-size limit while the
// cpu backend writes its copy of the module) after another device got its
// hook makes the plugin inactive with exactly one WARN: no later
// getDeviceHook returns a hook, on any device, in any cycle.
func TestInactiveAfterActivation(t *testing.T) {
	dir := t.TempDir()
	// The driver's 1-byte file-size limit holds for the whole process while
	// device 1 loads: a dump in that window (every 20 ms with exactProfile)
	// fails to write too, and is a second WARN this test is not about.
	prof := writeProfile(t, dir, strings.Replace(exactProfile, "dump_interval: 20ms", "dump_interval: 1h", 1))
	r := runDriver(t, []string{"NCCL_HOOKS_PROFILE=" + prof, "NCCL_HOOKS_BACKEND=cpu", "NCCL_HOOKS_DUMP_DIR=" + filepath.Join(dir, "out"), "CDRIVER_LOADFAIL=1"}, 2, 1, 1, 100, 3)
	if len(r.warns) != 1 || !strings.Contains(r.warns[0], "inactive") || !strings.Contains(r.warns[0], "device 1") {
		t.Fatalf("want one WARN that device 1 failed and the plugin is inactive, got %q", r.warns)
	}
	want := map[string]bool{"0 0": true} // handed out before the failure: NCCL keeps it
	for k, on := range r.hooks {
		if on != want[k] {
			t.Errorf("cycle/device %s: hook %v, want %v", k, on, want[k])
		}
	}
}

// cpu hooks are host functions: in a process without the harness's marker
// (a real NCCL job) the cpu backend is refused with one WARN, no hook.
func TestCPUHooksNeedTheHarness(t *testing.T) {
	dir := t.TempDir()
	prof := writeProfile(t, dir, exactProfile)
	bin := buildDriver(t, "-DCDRIVER_NO_MARKER")
	for _, backend := range []string{"cpu", "auto"} {
		r, err := startDriverBin(t, bin, []string{"NCCL_HOOKS_PROFILE=" + prof, "NCCL_HOOKS_BACKEND=" + backend, "NCCL_HOOKS_DUMP_DIR=" + filepath.Join(dir, "out-"+backend)}, 1, 1, 1, 10, 2)
		if err != nil || !strings.Contains(r.out, "DONE") {
			t.Fatalf("%s: %v\n%s", backend, err, r.out)
		}
		if len(r.warns) != 1 {
			t.Errorf("%s: want one WARN, got %q", backend, r.warns)
		}
		if backend == "cpu" && (len(r.warns) == 0 || !strings.Contains(r.warns[0], "cpu hooks are host functions")) {
			t.Errorf("the WARN does not say why: %q", r.warns)
		}
		for k, on := range r.hooks {
			if on {
				t.Errorf("%s: a hook for %s without the harness", backend, k)
			}
		}
	}
}

// A child forked after init (a data-loader worker) that calls the hook and
// is then killed with SIGTERM dies of SIGTERM at once (the dump thread and
// the outputs are the parent's); the parent's output is untouched by it
// and exact.
func TestForkAfterInit(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	prof := writeProfile(t, dir, exactProfile)
	r := runDriver(t, []string{"NCCL_HOOKS_PROFILE=" + prof, "NCCL_HOOKS_BACKEND=cpu", "NCCL_HOOKS_DUMP_DIR=" + out, "CDRIVER_FORK=1"}, 1, 1, 2, 2000, 2)
	if !strings.Contains(r.out, fmt.Sprintf("CHILD signal %d", unix.SIGTERM)) {
		t.Fatalf("the child did not die of SIGTERM:\n%s", r.out)
	}
	if len(r.warns) != 0 {
		t.Errorf("WARNs: %q", r.warns)
	}
	exact(t, r, readOutput(t, out), 1, 2)
}

// NCCL dlcloses the plugin after its last communicator and may load it
// again: the Go image stays (-z nodelete), and the totals go on, exact,
// over every load, in one file.
func TestDlcloseAndReload(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	prof := writeProfile(t, dir, exactProfile)
	r := runDriver(t, []string{"NCCL_HOOKS_PROFILE=" + prof, "NCCL_HOOKS_BACKEND=cpu", "NCCL_HOOKS_DUMP_DIR=" + out, "CDRIVER_RELOAD=1"}, 2, 1, 2, 2000, 3)
	if n := strings.Count(r.out, "RELOADED"); n != 2 || len(r.warns) != 0 {
		t.Fatalf("%d reloads, WARNs %q:\n%s", n, r.warns, r.out)
	}
	for k, on := range r.hooks {
		if !on {
			t.Errorf("no hook for %s after a reload", k)
		}
	}
	exact(t, r, readOutput(t, out), 2, 3)
}

// A FIFO under the output's name (opening it for writing would block
// until a reader came) is never opened: init goes on at once with a file
// of the plugin's own.
func TestFIFOInTheDumpDirectory(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	prof := writeProfile(t, dir, exactProfile)
	r := runDriver(t, []string{"NCCL_HOOKS_PROFILE=" + prof, "NCCL_HOOKS_BACKEND=cpu", "NCCL_HOOKS_DUMP_DIR=" + out,
		"CDRIVER_PLANT_DIR=" + out, "CDRIVER_PLANT_FIFO=1"}, 1, 1, 2, 500, 1)
	if len(r.warns) != 0 {
		t.Errorf("WARNs: %q", r.warns)
	}
	files, _ := filepath.Glob(filepath.Join(out, "ncclhooks-*.2.jsonl"))
	if len(files) != 1 {
		t.Fatalf("want the output in ncclhooks-<host>-<pid>.2.jsonl, got %v", files)
	}
	exact(t, r, readOutputFile(t, files[0]), 1, 1)
}

// A dump directory that cannot be written (a read-only file system; a
// path through a regular file) leaves the plugin inactive with one WARN
// naming the knob, and the job unharmed.
func TestUnwritableDumpDirectory(t *testing.T) {
	dir := t.TempDir()
	prof := writeProfile(t, dir, exactProfile)
	ro := filepath.Join(dir, "ro")
	if err := os.Mkdir(ro, 0o755); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if err := unix.Mount("tmpfs", ro, "tmpfs", unix.MS_RDONLY, ""); err != nil {
			t.Skipf("root without the right to mount a read-only tmpfs: %v", err)
		}
		defer unix.Unmount(ro, 0)
	} else if err := os.Chmod(ro, 0o555); err != nil {
		t.Fatal(err)
	}
	file := writeProfile(t, t.TempDir(), "not a directory")
	for _, c := range []struct{ dir, want string }{
		{filepath.Join(ro, "out"), "read-only file system"},
		{ro, "read-only file system"},
		{filepath.Join(file, "out"), "not a directory"},
	} {
		r := runDriver(t, []string{"NCCL_HOOKS_PROFILE=" + prof, "NCCL_HOOKS_BACKEND=cpu", "NCCL_HOOKS_DUMP_DIR=" + c.dir}, 1, 1, 1, 10, 2)
		if len(r.warns) != 1 || !strings.Contains(r.warns[0], "NCCL_HOOKS_DUMP_DIR") || (os.Geteuid() == 0 && !strings.Contains(r.warns[0], c.want)) {
			t.Errorf("%s: want one WARN naming NCCL_HOOKS_DUMP_DIR (%s), got %q", c.dir, c.want, r.warns)
		}
		for k, on := range r.hooks {
			if on {
				t.Errorf("%s: hook for %s without outputs", c.dir, k)
			}
		}
	}
}

// Without the CUDA driver or a device (CI's case): the gpu backend leaves
// the plugin inactive with one WARN that says what is missing; auto falls
// back to the cpu backend only under the harness, with no WARN.
func TestMissingCUDA(t *testing.T) {
	_, err := cuda.Open()
	if !errors.Is(err, cuda.ErrNoDriver) && !errors.Is(err, cuda.ErrNoDevice) {
		t.Skipf("a CUDA device is usable here (%v): nothing is missing", err)
	}
	missing := "libcuda"
	if errors.Is(err, cuda.ErrNoDevice) {
		missing = "no CUDA-capable device"
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	prof := writeProfile(t, dir, exactProfile)
	r := runDriver(t, []string{"NCCL_HOOKS_PROFILE=" + prof, "NCCL_HOOKS_BACKEND=gpu", "NCCL_HOOKS_DUMP_DIR=" + filepath.Join(dir, "gpu")}, 1, 1, 1, 10, 1)
	if len(r.warns) != 1 || !strings.Contains(r.warns[0], missing) || r.hooks["0 0"] {
		t.Errorf("gpu without CUDA: want no hook and one WARN with %q, got hook %v, %q", missing, r.hooks["0 0"], r.warns)
	}
	r = runDriver(t, []string{"NCCL_HOOKS_PROFILE=" + prof, "NCCL_HOOKS_DUMP_DIR=" + out}, 1, 1, 2, 500, 1)
	if len(r.warns) != 0 || !r.hooks["0 0"] || !strings.Contains(r.out, "using the cpu backend") {
		t.Fatalf("auto without CUDA under the harness: hook %v, WARNs %q", r.hooks["0 0"], r.warns)
	}
	exact(t, r, readOutput(t, out), 1, 1)
}
