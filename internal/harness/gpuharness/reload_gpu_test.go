package gpuharness

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ncclhooks/ncclhooks/internal/cuda"
	"github.com/ncclhooks/ncclhooks/internal/gputest"
	"github.com/ncclhooks/ncclhooks/internal/testbuild"
)

// TestReloadLatencyGPU swaps the profile of a running GPU job through the
// real plugin and CLI (NCCLHOOKS_CLI, with the plugin beside it or
// NCCLHOOKS_PLUGIN; built here when Go is present): the harness's kernels
// (CUDA graphs, captured once, with the switch's entry and slots) run paced
// while the profile file is rewritten; the second half of the replays runs
// the same graphs after the switch. Every epoch's accounting must be exact,
// and the epochs' matches must add up to every event. It logs the time from
// the file change to the switch and to the first record of the new hook (on
// the host's clock, through the device's clock line), as a row for
// bench/RESULTS.md; nccl-eBPF's policy reload (9.4 ms) is the anchor.
func TestReloadLatencyGPU(t *testing.T) {
	_, err := cuda.OpenGPU()
	gputest.Open(t, err)
	dir := t.TempDir()
	cli, plugin := cliAndPlugin(t, dir)
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	before := write("before.yaml", `version: 1
name: before
hooks:
  - name: all
    fields: [timestamp, workCounter, funcId, channelId, phase, {field: comm, type: u8}]
    buffer: {slots: 65536, overflow: drop_newest}
`)
	after := write("after.yaml", `version: 1
name: after
hooks:
  - name: all2
    fields: [{field: timestamp, as: ts}, workCounter, channelId, phase, {field: comm, type: u8}]
    buffer: {slots: 65536, overflow: drop_newest}
`)
	interval := os.Getenv("NCCLHOOKS_RELOAD_INTERVAL")
	if interval == "" {
		interval = "10ms"
	}
	// 2 communicators x 8 channels x 20000 items x 6 replays x 2 events
	// at 1 M events/s: about 3.8 s, the switch inside the first half.
	args := []string{"run", before, "--backend", "gpu", "--devices", "1", "--comms", "2", "--channels", "8", "--items", "20000",
		"--bytes", "1024", "--graph", "--replays", "6", "--event-rate", "1e6", "--plugin", plugin, "--out", filepath.Join(dir, "out"),
		"--reload-interval", interval, "--reload-to", after}
	cmd := exec.Command(cli, args...)
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "NCCL_HOOKS_") || strings.HasPrefix(e, "NCCL_HOOKS_CACHE_DIR=") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	out, err := cmd.CombinedOutput()
	res := string(out)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", cli, strings.Join(args, " "), err, res)
	}
	for _, want := range []string{"all@0", "all2@1", "each event matched in exactly one", "result: exact"} {
		if !strings.Contains(res, want) {
			t.Errorf("no %q in:\n%s", want, res)
		}
	}
	if strings.Contains(res, "MISMATCH") {
		t.Errorf("mismatch:\n%s", res)
	}
	lat := regexp.MustCompile(`reload: epoch 1, profile "after" \(sha256 [0-9a-f]+\): active ([0-9.]+) ms after the file change, first record \(all2\) ([0-9.-]+) ms after it`).FindStringSubmatch(res)
	if lat == nil {
		t.Fatalf("no reload latency line in:\n%s", res)
	}
	var sw string
	if m := regexp.MustCompile(`reload switch[^\n]*`).FindString(res); m != "" {
		sw = m
	}
	t.Logf("RESULTS.md row: | GPU (%s), poll %s, graphs replayed across the switch | file change -> switch %s ms | -> first record of the new hook %s ms | %s |",
		deviceName(t), interval, lat[1], lat[2], sw)
	t.Logf("output:\n%s", res)
}

// cliAndPlugin finds the CLI (NCCLHOOKS_CLI) and the plugin
// (NCCLHOOKS_PLUGIN, else beside the CLI), building what is missing into
// dir when Go is present.
func cliAndPlugin(t *testing.T, dir string) (cli, plugin string) {
	t.Helper()
	var err error
	if cli = os.Getenv("NCCLHOOKS_CLI"); cli == "" {
		if cli, err = testbuild.CLI(dir); err != nil {
			t.Fatalf("no NCCLHOOKS_CLI and building the CLI failed: %v", err)
		}
	}
	if plugin = os.Getenv("NCCLHOOKS_PLUGIN"); plugin == "" {
		plugin = filepath.Join(filepath.Dir(cli), "libnccl-profiler-hooks.so")
		if _, err := os.Stat(plugin); err != nil {
			if plugin, err = testbuild.Plugin(dir); err != nil {
				t.Fatalf("no NCCLHOOKS_PLUGIN and building the plugin failed: %v", err)
			}
		}
	}
	return cli, plugin
}

func deviceName(t *testing.T) string {
	lib, err := cuda.OpenGPU()
	if err != nil {
		return "?"
	}
	d, err := lib.Device(0)
	if err != nil {
		return "?"
	}
	defer d.Close()
	return d.Name
}
