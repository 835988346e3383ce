package gpuinfo

import (
	"slices"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// The values this package passes to NVML and reads back are go-nvml's.
func TestConstantsAreNVMLs(t *testing.T) {
	for _, c := range []struct {
		name     string
		ours, nv int64
	}{
		{"SUCCESS", int64(Success), int64(nvml.SUCCESS)},
		{"ERROR_NOT_SUPPORTED", int64(ErrNotSupported), int64(nvml.ERROR_NOT_SUPPORTED)},
		{"ERROR_NOT_FOUND", int64(ErrNotFound), int64(nvml.ERROR_NOT_FOUND)},
		{"CLOCK_SM", ClockSM, int64(nvml.CLOCK_SM)},
		{"CLOCK_MEM", ClockMem, int64(nvml.CLOCK_MEM)},
		{"TEMPERATURE_GPU", TemperatureGPU, int64(nvml.TEMPERATURE_GPU)},
		{"MEMORY_ERROR_TYPE_CORRECTED", MemoryErrorCorrected, int64(nvml.MEMORY_ERROR_TYPE_CORRECTED)},
		{"MEMORY_ERROR_TYPE_UNCORRECTED", MemoryErrorUncorrected, int64(nvml.MEMORY_ERROR_TYPE_UNCORRECTED)},
		{"VOLATILE_ECC", VolatileECC, int64(nvml.VOLATILE_ECC)},
		{"NVLINK_ERROR_DL_REPLAY", NVLinkErrorReplay, int64(nvml.NVLINK_ERROR_DL_REPLAY)},
		{"NVLINK_ERROR_DL_RECOVERY", NVLinkErrorRecovery, int64(nvml.NVLINK_ERROR_DL_RECOVERY)},
		{"NVLINK_ERROR_DL_CRC_FLIT", NVLinkErrorCRCFlit, int64(nvml.NVLINK_ERROR_DL_CRC_FLIT)},
		{"NVLINK_ERROR_DL_CRC_DATA", NVLinkErrorCRCData, int64(nvml.NVLINK_ERROR_DL_CRC_DATA)},
		{"FEATURE_ENABLED", FeatureEnabled, int64(nvml.FEATURE_ENABLED)},
		{"NVLINK_MAX_LINKS", MaxNVLinks, int64(nvml.NVLINK_MAX_LINKS)},
		{"ClocksEventReasonGpuIdle", 0x1, nvml.ClocksEventReasonGpuIdle},
		{"ClocksEventReasonApplicationsClocksSetting", 0x2, nvml.ClocksEventReasonApplicationsClocksSetting},
		{"ClocksEventReasonSwPowerCap", 0x4, nvml.ClocksEventReasonSwPowerCap},
		{"ClocksThrottleReasonHwSlowdown", 0x8, nvml.ClocksThrottleReasonHwSlowdown},
		{"ClocksEventReasonSyncBoost", 0x10, nvml.ClocksEventReasonSyncBoost},
		{"ClocksEventReasonSwThermalSlowdown", 0x20, nvml.ClocksEventReasonSwThermalSlowdown},
		{"ClocksThrottleReasonHwThermalSlowdown", 0x40, nvml.ClocksThrottleReasonHwThermalSlowdown},
		{"ClocksThrottleReasonHwPowerBrakeSlowdown", 0x80, nvml.ClocksThrottleReasonHwPowerBrakeSlowdown},
		{"ClocksEventReasonDisplayClockSetting", 0x100, nvml.ClocksEventReasonDisplayClockSetting},
	} {
		if c.ours != c.nv {
			t.Errorf("%s: ours %d, go-nvml's %d", c.name, c.ours, c.nv)
		}
	}
	for _, r := range reasonNames {
		if !slices.Contains(ReasonNames(r.bit), r.name) {
			t.Errorf("bit %#x is not named %s", r.bit, r.name)
		}
	}
}
