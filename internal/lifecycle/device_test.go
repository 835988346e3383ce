package lifecycle_test

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/ncclhooks/ncclhooks/internal/backend"
	"github.com/ncclhooks/ncclhooks/internal/gpuinfo"
	"github.com/ncclhooks/ncclhooks/internal/gpuinfo/gpuinfotest"
	"github.com/ncclhooks/ncclhooks/internal/lifecycle"
	"github.com/ncclhooks/ncclhooks/internal/sinks"
)

// idDevice is a device that only knows its ordinal and identity: all a
// device line asks of it.
type idDevice struct {
	backend.Device
	ord int
	id  backend.Identity
}

func (d idDevice) Ordinal() int               { return d.ord }
func (d idDevice) Identity() backend.Identity { return d.id }

func nvmlSession(l *logs, open func() (gpuinfo.Interface, error)) *lifecycle.Session {
	return lifecycle.New(lifecycle.Env{Log: l.log, NVML: open})
}

// eventually calls f every 10 ms until it is true, for at most 10 s (the
// state is read in the background).
func eventually(t *testing.T, what string, f func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !f(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s: %s", what)
		}
	}
}

// Without libnvidia-ml, device lines keep the driver's identity; one INFO
// says why they have no clocks, however many dumps ask.
func TestDeviceStateWithoutNVML(t *testing.T) {
	l := &logs{}
	var opened atomic.Int32
	s := nvmlSession(l, func() (gpuinfo.Interface, error) {
		opened.Add(1)
		return nil, errors.New("libnvidia-ml.so.1: cannot open shared object file: No such file or directory")
	})
	gpu := idDevice{ord: 0, id: backend.Identity{Name: "NVIDIA H200", UUID: "GPU-0b6f", PCIBusID: "0000:19:00.0"}}
	check := func() {
		st := s.DeviceState(gpu)
		if st.Name != "NVIDIA H200" || st.UUID != "GPU-0b6f" || st.PCIBusID != "0000:19:00.0" || st.SMClockMHz != nil || st.ClockEventReasons != nil {
			t.Fatalf("state %+v: want the identity alone", st)
		}
	}
	check()
	eventually(t, "no INFO about NVML", func() bool { return l.count("INFO") == 1 })
	for range 3 {
		check()
		time.Sleep(20 * time.Millisecond)
	}
	if opened.Load() != 1 || l.count("INFO") != 1 || l.count("WARN") != 0 || !strings.Contains(strings.Join(l.lines, "\n"), "NVML not available") {
		t.Errorf("NVML opened %d times; logs %q: want one open and one INFO", opened.Load(), l.lines)
	}
}

// A GPU whose NVML query hangs does not hold up the dumps: each returns at
// once, with the identity.
func TestDeviceStateDoesNotWaitForNVML(t *testing.T) {
	srv, d0 := gpuinfotest.H200()
	release := make(chan struct{})
	defer close(release)
	d0.GetClockInfoFunc = func(nvml.ClockType) (uint32, nvml.Return) { <-release; return 1, nvml.SUCCESS }
	s := nvmlSession(&logs{}, func() (gpuinfo.Interface, error) { return gpuinfotest.FromNVML(srv), nil })
	uuid, _ := d0.GetUUID()
	done := make(chan struct{})
	go func() {
		for range 5 {
			s.DeviceState(idDevice{ord: 0, id: backend.Identity{Name: "NVIDIA H200", UUID: uuid}})
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("DeviceState waited for a hung NVML query")
	}
}

// With NVML (go-nvml's mock of a DGX H200), a GPU's device line carries its
// state; a GPU NVML does not know keeps its identity, after one INFO; a cpu
// device never opens NVML.
func TestDeviceStateFromNVML(t *testing.T) {
	srv, d0 := gpuinfotest.H200()
	l := &logs{}
	var opened atomic.Int32
	s := nvmlSession(l, func() (gpuinfo.Interface, error) { opened.Add(1); return gpuinfotest.FromNVML(srv), nil })
	if st := s.DeviceState(idDevice{ord: 0, id: backend.Identity{Name: "cpu: x"}}); st.Name != "cpu: x" {
		t.Fatalf("cpu device: %+v", st)
	}
	time.Sleep(50 * time.Millisecond)
	if opened.Load() != 0 {
		t.Fatalf("a cpu device opened NVML")
	}
	uuid, _ := d0.GetUUID()
	gpu := idDevice{ord: 3, id: backend.Identity{Name: "NVIDIA H200", UUID: uuid}}
	if st := s.DeviceState(gpu); st.Device != 3 || st.UUID != uuid || st.SMClockMHz != nil {
		t.Errorf("first dump: %+v: want the identity, the state not read yet", st)
	}
	var st sinks.DeviceState
	eventually(t, "no state from NVML", func() bool { st = s.DeviceState(gpu); return st.SMClockMHz != nil })
	if *st.SMClockMHz != 1980 || st.ClockEventReasons == nil || gpuinfo.Slowdown(*st.ClockEventReasons) == 0 || st.PowerMW != nil {
		t.Errorf("state %+v: want the mock's clocks and power cap, no power", st)
	}
	unknown := idDevice{ord: 1, id: backend.Identity{Name: "NVIDIA H200", UUID: "GPU-unknown"}}
	eventually(t, "no INFO about the unknown GPU", func() bool { s.DeviceState(unknown); return l.count("INFO") == 1 })
	for range 3 {
		if st := s.DeviceState(unknown); st.UUID != "GPU-unknown" || st.SMClockMHz != nil {
			t.Errorf("unknown GPU: %+v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if opened.Load() != 1 || l.count("INFO") != 1 || l.count("WARN") != 0 {
		t.Errorf("NVML opened %d times; logs %q", opened.Load(), l.lines)
	}
}

// A read of NVML that panics logs one WARN; the process goes on, and the
// GPU is not read again.
func TestDeviceStatePanicInNVML(t *testing.T) {
	srv, d0 := gpuinfotest.H200()
	var calls atomic.Int32
	d0.GetClockInfoFunc = func(nvml.ClockType) (uint32, nvml.Return) { calls.Add(1); panic("driver bug") }
	l := &logs{}
	s := nvmlSession(l, func() (gpuinfo.Interface, error) { return gpuinfotest.FromNVML(srv), nil })
	uuid, _ := d0.GetUUID()
	gpu := idDevice{ord: 0, id: backend.Identity{Name: "NVIDIA H200", UUID: uuid}}
	s.DeviceState(gpu)
	eventually(t, "no WARN about the panic", func() bool { return l.count("WARN") == 1 })
	for range 3 {
		s.DeviceState(gpu)
		time.Sleep(20 * time.Millisecond)
	}
	if calls.Load() != 1 || l.count("WARN") != 1 || !strings.Contains(strings.Join(l.lines, "\n"), "driver bug") {
		t.Errorf("%d reads, logs %q: want one read and one WARN", calls.Load(), l.lines)
	}
}
