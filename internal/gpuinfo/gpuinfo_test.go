package gpuinfo_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/ncclhooks/ncclhooks/internal/gpuinfo"
	"github.com/ncclhooks/ncclhooks/internal/gpuinfo/gpuinfotest"
)

func TestSampleReadsWhatNVMLOffers(t *testing.T) {
	srv, d := gpuinfotest.H200()
	s, err := gpuinfo.NewSampler(gpuinfotest.FromNVML(srv))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	uuid, _ := d.GetUUID()
	st, err := s.Sample(uuid, "")
	if err != nil {
		t.Fatal(err)
	}
	eq32 := func(what string, got *uint32, want uint32) {
		if got == nil || *got != want {
			t.Errorf("%s = %v, want %d", what, deref(got), want)
		}
	}
	eq64 := func(what string, got *uint64, want uint64) {
		if got == nil || *got != want {
			t.Errorf("%s = %v, want %d", what, deref(got), want)
		}
	}
	eq32("SM clock", st.SMClockMHz, 1980)
	eq32("memory clock", st.MemClockMHz, 3201)
	eq32("temperature", st.TemperatureC, 41)
	eq64("clock event reasons", st.ClockEventReasons, 0x5)
	eq64("ECC corrected", st.ECCCorrected, 3)
	eq64("ECC uncorrected", st.ECCUncorrected, 0)
	eq64("NVLink errors", st.NVLinkErrors, 3)
	if st.PowerMW != nil {
		t.Errorf("power = %d, want it left out (the query failed)", *st.PowerMW)
	}
	if st.NVLinks != 18 {
		t.Errorf("%d active links, want 18", st.NVLinks)
	}
	if got := gpuinfo.ReasonNames(*st.ClockEventReasons); !slices.Equal(got, []string{"gpu_idle", "sw_power_cap"}) {
		t.Errorf("reasons %v", got)
	}
	if gpuinfo.Slowdown(*st.ClockEventReasons) != 0x4 {
		t.Errorf("slowdown of %#x = %#x, want the power cap alone", *st.ClockEventReasons, gpuinfo.Slowdown(*st.ClockEventReasons))
	}
}

// A device NVML answers no query for (no clocks, no NVLink, no ECC) gives a
// state with nothing in it; a GPU NVML does not know is
// an error, found by PCI bus id when the UUID is not known.
func TestSampleLeavesOutFailingQueries(t *testing.T) {
	srv, _ := gpuinfotest.H200()
	s, err := gpuinfo.NewSampler(gpuinfotest.FromNVML(srv))
	if err != nil {
		t.Fatal(err)
	}
	nd, _ := srv.DeviceGetHandleByIndex(1)
	d1 := nd.(*server.Device)
	fail32 := func() (uint32, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
	d1.GetClockInfoFunc = func(nvml.ClockType) (uint32, nvml.Return) { return fail32() }
	d1.GetCurrentClocksEventReasonsFunc = func() (uint64, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
	d1.GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) { return fail32() }
	d1.GetPowerUsageFunc = fail32
	d1.GetTotalEccErrorsFunc = func(nvml.MemoryErrorType, nvml.EccCounterType) (uint64, nvml.Return) {
		return 0, nvml.ERROR_NOT_SUPPORTED
	}
	d1.GetNvLinkStateFunc = func(int) (nvml.EnableState, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
	bus := d1.PciBusID
	st, err := s.Sample("GPU-not-known", bus)
	if err != nil {
		t.Fatalf("found by PCI bus id %s: %v", bus, err)
	}
	if st.SMClockMHz != nil || st.MemClockMHz != nil || st.ClockEventReasons != nil || st.TemperatureC != nil ||
		st.PowerMW != nil || st.ECCCorrected != nil || st.ECCUncorrected != nil || st.NVLinkErrors != nil {
		t.Errorf("state %+v: want every query left out", st)
	}
	if _, err := s.Sample("GPU-not-known", ""); err == nil {
		t.Error("an unknown UUID sampled without error")
	}
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// NewSampler fails, and says why, when nvmlInit does.
func TestNewSamplerFailsWhenInitDoes(t *testing.T) {
	srv, _ := gpuinfotest.H200()
	srv.InitFunc = func() nvml.Return { return nvml.ERROR_DRIVER_NOT_LOADED }
	if _, err := gpuinfo.NewSampler(gpuinfotest.FromNVML(srv)); err == nil {
		t.Error("NewSampler succeeded with a failing nvmlInit")
	}
}

// A missing NVML library is an error that names it (the plugin logs it as
// one INFO and names its GPUs by the driver's identity only).
func TestOpenMissingLibrary(t *testing.T) {
	const missing = "libnvidia-ml-not-installed.so.1"
	if _, err := gpuinfo.OpenLibrary(missing); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("opening %s: %v, want an error naming it", missing, err)
	}
	bogus := filepath.Join(t.TempDir(), "libnvidia-ml.so.1")
	if err := os.WriteFile(bogus, []byte("not a library"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := gpuinfo.OpenLibrary(bogus); err == nil {
		t.Errorf("opening a file that is no library succeeded")
	}
}
