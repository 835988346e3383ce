// Package gpuinfotest drives package gpuinfo with go-nvml's NVML mock
// (github.com/NVIDIA/go-nvml/pkg/nvml/mock) for tests where no GPU is
// present. Only tests import it: go-nvml's binding cannot be linked into the
// plugin (see package gpuinfo).
package gpuinfotest

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/ncclhooks/ncclhooks/internal/gpuinfo"
)

// FromNVML adapts go-nvml's nvml.Interface (its mock, or the real library
// in a test binary) to gpuinfo.Interface.
func FromNVML(l nvml.Interface) gpuinfo.Interface { return lib{l} }

// lib adapts go-nvml's nvml.Interface to gpuinfo.Interface.
type lib struct{ l nvml.Interface }

func (m lib) Init() gpuinfo.Return     { return gpuinfo.Return(m.l.Init()) }
func (m lib) Shutdown() gpuinfo.Return { return gpuinfo.Return(m.l.Shutdown()) }
func (m lib) DeviceGetHandleByUUID(uuid string) (gpuinfo.Device, gpuinfo.Return) {
	d, r := m.l.DeviceGetHandleByUUID(uuid)
	return device{d}, gpuinfo.Return(r)
}
func (m lib) DeviceGetHandleByPciBusId(bus string) (gpuinfo.Device, gpuinfo.Return) {
	d, r := m.l.DeviceGetHandleByPciBusId(bus)
	return device{d}, gpuinfo.Return(r)
}

type device struct{ d nvml.Device }

func (m device) GetName() (string, gpuinfo.Return) {
	v, r := m.d.GetName()
	return v, gpuinfo.Return(r)
}
func (m device) GetUUID() (string, gpuinfo.Return) {
	v, r := m.d.GetUUID()
	return v, gpuinfo.Return(r)
}
func (m device) GetClockInfo(t int) (uint32, gpuinfo.Return) {
	v, r := m.d.GetClockInfo(nvml.ClockType(t))
	return v, gpuinfo.Return(r)
}
func (m device) GetCurrentClocksEventReasons() (uint64, gpuinfo.Return) {
	v, r := m.d.GetCurrentClocksEventReasons()
	return v, gpuinfo.Return(r)
}
func (m device) GetTemperature(s int) (uint32, gpuinfo.Return) {
	v, r := m.d.GetTemperature(nvml.TemperatureSensors(s))
	return v, gpuinfo.Return(r)
}
func (m device) GetPowerUsage() (uint32, gpuinfo.Return) {
	v, r := m.d.GetPowerUsage()
	return v, gpuinfo.Return(r)
}
func (m device) GetTotalEccErrors(e, c int) (uint64, gpuinfo.Return) {
	v, r := m.d.GetTotalEccErrors(nvml.MemoryErrorType(e), nvml.EccCounterType(c))
	return v, gpuinfo.Return(r)
}
func (m device) GetNvLinkState(l int) (int, gpuinfo.Return) {
	v, r := m.d.GetNvLinkState(l)
	return int(v), gpuinfo.Return(r)
}
func (m device) GetNvLinkErrorCounter(l, c int) (uint64, gpuinfo.Return) {
	v, r := m.d.GetNvLinkErrorCounter(l, nvml.NvLinkErrorCounter(c))
	return v, gpuinfo.Return(r)
}

// H200 is go-nvml's mock DGX H200 whose device 0 answers the state queries:
// SM 1980 MHz, memory 3201 MHz, power capped while idle, 41 C, power not
// supported, 3 corrected and 0 uncorrected ECC errors, links 0-17 active
// with 2 replays on link 4 and 1 CRC error on link 9.
func H200() (*server.Server, *server.Device) {
	srv := dgxh200.New()
	nd, ret := srv.DeviceGetHandleByIndex(0)
	if ret != nvml.SUCCESS {
		panic(ret)
	}
	d := nd.(*server.Device)
	d.GetClockInfoFunc = func(c nvml.ClockType) (uint32, nvml.Return) {
		switch c {
		case nvml.CLOCK_SM:
			return 1980, nvml.SUCCESS
		case nvml.CLOCK_MEM:
			return 3201, nvml.SUCCESS
		}
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	d.GetCurrentClocksEventReasonsFunc = func() (uint64, nvml.Return) {
		return nvml.ClocksEventReasonGpuIdle | nvml.ClocksEventReasonSwPowerCap, nvml.SUCCESS
	}
	d.GetTemperatureFunc = func(s nvml.TemperatureSensors) (uint32, nvml.Return) {
		if s != nvml.TEMPERATURE_GPU {
			return 0, nvml.ERROR_INVALID_ARGUMENT
		}
		return 41, nvml.SUCCESS
	}
	d.GetPowerUsageFunc = func() (uint32, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
	d.GetTotalEccErrorsFunc = func(e nvml.MemoryErrorType, c nvml.EccCounterType) (uint64, nvml.Return) {
		if c != nvml.VOLATILE_ECC {
			return 0, nvml.ERROR_INVALID_ARGUMENT
		}
		if e == nvml.MEMORY_ERROR_TYPE_CORRECTED {
			return 3, nvml.SUCCESS
		}
		return 0, nvml.SUCCESS
	}
	d.GetNvLinkStateFunc = func(link int) (nvml.EnableState, nvml.Return) {
		if link >= 18 {
			return 0, nvml.ERROR_INVALID_ARGUMENT
		}
		return nvml.FEATURE_ENABLED, nvml.SUCCESS
	}
	d.GetNvLinkErrorCounterFunc = func(link int, c nvml.NvLinkErrorCounter) (uint64, nvml.Return) {
		switch {
		case link == 4 && c == nvml.NVLINK_ERROR_DL_REPLAY:
			return 2, nvml.SUCCESS
		case link == 9 && c == nvml.NVLINK_ERROR_DL_CRC_DATA:
			return 1, nvml.SUCCESS
		}
		return 0, nvml.SUCCESS
	}
	return srv, d
}
