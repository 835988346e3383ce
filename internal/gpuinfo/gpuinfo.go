// Package gpuinfo reads a GPU's state from NVML for the outputs' device
// lines: clocks, clock event (throttle) reasons, temperature, power, and the
// ECC and NVLink error counters NVML offers cheaply.
//
// NVML is opened at run time, never linked: a machine without
// libnvidia-ml still loads the plugin, which then names its GPUs by what the
// CUDA driver says. The plugin cannot use github.com/NVIDIA/go-nvml's
// binding itself: it links every NVML function as an undefined symbol to be
// found once go-nvml has dlopened the library RTLD_GLOBAL, and NCCL
// dlopens its profiler plugin RTLD_NOW, which refuses a library with an
// undefined symbol ("undefined symbol: nvmlGpuInstanceGetComputeInstance...").
// So this package binds the dozen functions it calls with dlsym (hk_nvml.c),
// behind Interface and Device: the subset of go-nvml's interfaces it uses,
// with the same method names and go-nvml's numeric values, so that go-nvml's
// mock (pkg/nvml/mock) drives the tests.
package gpuinfo

import (
	"fmt"
	"strings"
	"sync"
)

// Return is an nvmlReturn_t (go-nvml's nvml.Return).
type Return int32

// The results this package tells apart.
const (
	Success         Return = 0
	ErrNotSupported Return = 3
	ErrNotFound     Return = 6
	errMissing      Return = -4242 // the library lacks the function (HK_NVML_MISSING)
)

// Enumerations of nvml.h, as go-nvml numbers them.
const (
	ClockSM  = 1 // NVML_CLOCK_SM
	ClockMem = 2 // NVML_CLOCK_MEM

	TemperatureGPU = 0 // NVML_TEMPERATURE_GPU

	MemoryErrorCorrected   = 0 // NVML_MEMORY_ERROR_TYPE_CORRECTED
	MemoryErrorUncorrected = 1 // NVML_MEMORY_ERROR_TYPE_UNCORRECTED
	VolatileECC            = 0 // NVML_VOLATILE_ECC: since the driver loaded

	NVLinkErrorReplay   = 0 // NVML_NVLINK_ERROR_DL_REPLAY
	NVLinkErrorRecovery = 1 // NVML_NVLINK_ERROR_DL_RECOVERY
	NVLinkErrorCRCFlit  = 2 // NVML_NVLINK_ERROR_DL_CRC_FLIT
	NVLinkErrorCRCData  = 3 // NVML_NVLINK_ERROR_DL_CRC_DATA

	FeatureEnabled = 1  // NVML_FEATURE_ENABLED
	MaxNVLinks     = 36 // NVML_NVLINK_MAX_LINKS
)

// Interface is the part of NVML (go-nvml's nvml.Interface) this package uses.
type Interface interface {
	Init() Return
	Shutdown() Return
	DeviceGetHandleByUUID(uuid string) (Device, Return)
	DeviceGetHandleByPciBusId(busID string) (Device, Return)
}

// Device is the part of an NVML device handle (go-nvml's nvml.Device) this
// package uses.
type Device interface {
	GetName() (string, Return)
	GetUUID() (string, Return)
	GetClockInfo(clockType int) (uint32, Return)
	GetCurrentClocksEventReasons() (uint64, Return)
	GetTemperature(sensor int) (uint32, Return)
	GetPowerUsage() (uint32, Return)
	GetTotalEccErrors(errorType, counterType int) (uint64, Return)
	GetNvLinkState(link int) (int, Return)
	GetNvLinkErrorCounter(link, counter int) (uint64, Return)
}

// State is a device's state at one moment. A field is nil when its query
// failed or NVML does not offer it for the device.
type State struct {
	Name              string  // NVML's name of the device ("NVIDIA H200")
	SMClockMHz        *uint32 // current SM clock
	MemClockMHz       *uint32 // current memory clock
	ClockEventReasons *uint64 // NVML's bitmask of why the clocks are what they are
	TemperatureC      *uint32 // GPU die
	PowerMW           *uint32 // board power draw
	ECCCorrected      *uint64 // volatile (since the driver loaded)
	ECCUncorrected    *uint64 // volatile
	NVLinkErrors      *uint64 // replay + recovery + CRC errors over the active links
	NVLinks           int     // active NVLinks (0 with NVLinkErrors nil: none, or not offered)
}

// Clock event reasons (nvml.h's nvmlClocksEventReason*, go-nvml's
// ClocksEventReason*), by bit.
var reasonNames = []struct {
	bit      uint64
	name     string
	slowdown bool // the clocks are held below what the work asks for
}{
	{0x1, "gpu_idle", false},
	{0x2, "applications_clocks_setting", false},
	{0x4, "sw_power_cap", true},
	{0x8, "hw_slowdown", true},
	{0x10, "sync_boost", true},
	{0x20, "sw_thermal_slowdown", true},
	{0x40, "hw_thermal_slowdown", true},
	{0x80, "hw_power_brake_slowdown", true},
	{0x100, "display_clock_setting", false},
}

// ReasonNames spells a clock event reason bitmask ("sw_power_cap",
// "hw_thermal_slowdown", ...; an unknown bit as "0x...").
func ReasonNames(mask uint64) []string {
	var out []string
	for _, r := range reasonNames {
		if mask&r.bit != 0 {
			out = append(out, r.name)
			mask &^= r.bit
		}
	}
	for bit := uint64(1); mask != 0; bit <<= 1 {
		if mask&bit != 0 {
			out = append(out, fmt.Sprintf("%#x", bit))
			mask &^= bit
		}
	}
	return out
}

// Slowdown is the part of a clock event reason mask that holds the clocks
// down (power cap, thermal, hardware slowdown, power brake, sync boost);
// idleness and application clock settings are not slowdowns.
func Slowdown(mask uint64) uint64 {
	var s uint64
	for _, r := range reasonNames {
		if r.slowdown {
			s |= r.bit
		}
	}
	return mask & s
}

// Sampler reads the state of the devices of one NVML library. It is safe
// for concurrent use.
type Sampler struct {
	lib  Interface
	mu   sync.Mutex
	devs map[string]*device // by UUID and PCI bus id
}

// device is a GPU NVML knows, with its active NVLinks, found at the first
// sample (36 link queries each dump would cost more than the rest).
type device struct {
	Device
	links []int
}

// NewSampler initialises lib.
func NewSampler(lib Interface) (*Sampler, error) {
	if r := lib.Init(); r != Success {
		return nil, fmt.Errorf("nvmlInit: %s", errorString(r))
	}
	return &Sampler{lib: lib, devs: map[string]*device{}}, nil
}

// Close shuts NVML down.
func (s *Sampler) Close() error {
	if r := s.lib.Shutdown(); r != Success {
		return fmt.Errorf("nvmlShutdown: %s", errorString(r))
	}
	return nil
}

// device finds the NVML handle of a GPU by its UUID, else its PCI bus id.
func (s *Sampler) device(uuid, pciBusID string) (*device, error) {
	key := uuid + "|" + pciBusID
	if d, ok := s.devs[key]; ok {
		return d, nil
	}
	var h Device
	r := ErrNotFound
	if uuid != "" {
		h, r = s.lib.DeviceGetHandleByUUID(uuid)
	}
	if r != Success && pciBusID != "" {
		h, r = s.lib.DeviceGetHandleByPciBusId(pciBusID)
	}
	if r != Success {
		return nil, fmt.Errorf("no NVML device with UUID %q or PCI bus id %q: %s", uuid, pciBusID, errorString(r))
	}
	d := &device{Device: h, links: activeLinks(h)}
	s.devs[key] = d
	return d, nil
}

// activeLinks are the NVLinks NVML reports enabled.
func activeLinks(d Device) []int {
	var links []int
	for l := range MaxNVLinks {
		state, r := d.GetNvLinkState(l)
		if r == ErrNotSupported && l == 0 {
			return nil // no NVLink on this device
		}
		if r == Success && state == FeatureEnabled {
			links = append(links, l)
		}
	}
	return links
}

// Sample reads a GPU's state. Queries that fail are left out of the state;
// the error is only for a GPU NVML does not know.
func (s *Sampler) Sample(uuid, pciBusID string) (State, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, err := s.device(uuid, pciBusID)
	if err != nil {
		return State{}, err
	}
	var st State
	st.SMClockMHz = ok32(d.GetClockInfo(ClockSM))
	st.MemClockMHz = ok32(d.GetClockInfo(ClockMem))
	st.ClockEventReasons = ok64(d.GetCurrentClocksEventReasons())
	st.TemperatureC = ok32(d.GetTemperature(TemperatureGPU))
	st.PowerMW = ok32(d.GetPowerUsage())
	st.ECCCorrected = ok64(d.GetTotalEccErrors(MemoryErrorCorrected, VolatileECC))
	st.ECCUncorrected = ok64(d.GetTotalEccErrors(MemoryErrorUncorrected, VolatileECC))
	st.NVLinkErrors, st.NVLinks = nvlinkErrors(d)
	return st, nil
}

// nvlinkErrors sums the DL error counters over the active links; nil when
// no link is active or none answers.
func nvlinkErrors(d *device) (*uint64, int) {
	var sum uint64
	answered := false
	for _, l := range d.links {
		for _, c := range []int{NVLinkErrorReplay, NVLinkErrorRecovery, NVLinkErrorCRCFlit, NVLinkErrorCRCData} {
			if n, r := d.GetNvLinkErrorCounter(l, c); r == Success {
				sum += n
				answered = true
			}
		}
	}
	if !answered {
		return nil, len(d.links)
	}
	return &sum, len(d.links)
}

func ok32(v uint32, r Return) *uint32 {
	if r != Success {
		return nil
	}
	return &v
}

func ok64(v uint64, r Return) *uint64 {
	if r != Success {
		return nil
	}
	return &v
}

var errorStringFunc = func(r Return) string { return fmt.Sprintf("NVML error %d", int(r)) }

func errorString(r Return) string {
	if r == errMissing {
		return "the NVML library lacks the function"
	}
	return strings.TrimSpace(errorStringFunc(r))
}
