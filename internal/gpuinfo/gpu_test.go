package gpuinfo_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ncclhooks/ncclhooks/internal/cuda"
	"github.com/ncclhooks/ncclhooks/internal/gpuinfo"
	"github.com/ncclhooks/ncclhooks/internal/gputest"
	"github.com/ncclhooks/ncclhooks/internal/schema"
	"github.com/ncclhooks/ncclhooks/internal/testbuild"
)

var (
	uuidRE = regexp.MustCompile(`^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	busRE  = regexp.MustCompile(`^[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]$`)
)

// The real GPU: the driver's UUID is NVML's (the same spelling names the
// same device), and NVML's clocks and temperature are read.
func TestGPUIdentityAndState(t *testing.T) {
	lib, err := cuda.OpenGPU()
	gputest.Open(t, err)
	dev, err := lib.Device(0)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	if !uuidRE.MatchString(dev.UUID) || !busRE.MatchString(dev.PCIBusID) {
		t.Fatalf("device 0: UUID %q, PCI bus id %q", dev.UUID, dev.PCIBusID)
	}
	nv, err := gpuinfo.Open()
	if err != nil {
		t.Fatalf("NVML on a machine with a GPU: %v", err)
	}
	if r := nv.Init(); r != gpuinfo.Success {
		t.Fatalf("nvmlInit: %d", r)
	}
	defer nv.Shutdown()
	h, r := nv.DeviceGetHandleByUUID(dev.UUID)
	if r != gpuinfo.Success {
		t.Fatalf("NVML does not know the driver's UUID %s: %d", dev.UUID, r)
	}
	if u, r := h.GetUUID(); r != gpuinfo.Success || u != dev.UUID {
		t.Errorf("NVML's UUID %q (%d), the driver's %q", u, r, dev.UUID)
	}
	s, err := gpuinfo.NewSampler(nv)
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.Sample(dev.UUID, dev.PCIBusID)
	if err != nil {
		t.Fatal(err)
	}
	if st.SMClockMHz == nil || *st.SMClockMHz == 0 || st.MemClockMHz == nil || *st.MemClockMHz == 0 ||
		st.TemperatureC == nil || *st.TemperatureC == 0 || st.ClockEventReasons == nil {
		t.Errorf("state %s: want clocks, temperature and clock event reasons", show(st))
	}
	t.Logf("%s %s %s: %s", dev.Name, dev.UUID, dev.PCIBusID, show(st))
}

// The plugin's device lines from a GPU run of the harness: the GPU's UUID,
// bus id and name, and at the dumps its clocks.
func TestGPUDeviceLines(t *testing.T) {
	_, err := cuda.OpenGPU()
	gputest.Open(t, err)
	cli, err := testbuild.CLI(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	// latency.yaml, dumping every 100 ms so that a short run has dumps whose
	// device lines carry NVML's state (read in the background from the load on).
	src, err := os.ReadFile("../../examples/latency.yaml")
	if err != nil {
		t.Fatal(err)
	}
	prof := filepath.Join(t.TempDir(), "latency.yaml")
	if err := os.WriteFile(prof, []byte(strings.Replace(string(src), "dump_interval: 1s", "dump_interval: 100ms", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(cli, "run", prof, "--backend", "gpu", "--out", out, "--devices", "1", "--comms", "2", "--items", "2000", "--replays", "20")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %v\n%s", cmd, err, b)
	}
	files, _ := filepath.Glob(filepath.Join(out, "*.jsonl"))
	if len(files) != 1 {
		t.Fatalf("%d output files", len(files))
	}
	data, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var devs []schema.Device
	var comms []schema.Comm
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		switch {
		case strings.HasPrefix(l, `{"type":"device"`):
			var d schema.Device
			if err := json.Unmarshal([]byte(l), &d); err != nil {
				t.Fatal(err)
			}
			devs = append(devs, d)
		case strings.HasPrefix(l, `{"type":"comm"`):
			var c schema.Comm
			if err := json.Unmarshal([]byte(l), &c); err != nil {
				t.Fatal(err)
			}
			comms = append(comms, c)
		}
	}
	if len(devs) < 2 {
		t.Fatalf("%d device lines, want one at load and one per dump", len(devs))
	}
	for _, d := range devs {
		if !uuidRE.MatchString(d.UUID) || !busRE.MatchString(d.PCIBusID) || !strings.Contains(d.Name, "NVIDIA") {
			t.Errorf("device line %+v: want the GPU's UUID, bus id and name", d)
		}
	}
	withState := 0
	for _, d := range devs[1:] { // the dumps': NVML's state
		if d.SMClockMHz != nil {
			withState++
			if *d.SMClockMHz == 0 || d.MemClockMHz == nil || *d.MemClockMHz == 0 || d.TemperatureC == nil || d.ClockEventReasons == nil {
				t.Errorf("device line %s: want clocks, temperature and clock event reasons", show(d))
			}
		}
	}
	if withState == 0 || devs[len(devs)-1].SMClockMHz == nil {
		t.Errorf("%d of %d dumps' device lines carry NVML's state, the final one %v: want it", withState, len(devs)-1, devs[len(devs)-1].SMClockMHz != nil)
	}
	t.Logf("%d device lines, %d with NVML's state; the last: %s", len(devs), withState, show(devs[len(devs)-1]))
	for _, c := range comms {
		if c.UUID != devs[0].UUID {
			t.Errorf("comm line %+v: want the GPU's UUID %s", c, devs[0].UUID)
		}
	}
}

func show(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
