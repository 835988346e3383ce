// The few NVML entry points package gpuinfo calls, bound with dlopen/dlsym at
// run time. No NVML header is used: the types below have the layout of
// nvml.h (handles are pointers, results and enums are ints).
#ifndef NCCLHOOKS_HK_NVML_H
#define NCCLHOOKS_HK_NVML_H

#include <stddef.h>
#include <stdint.h>

typedef uintptr_t hk_nvml_dev; // nvmlDevice_t

// hk_nvml_open dlopens libnvidia-ml (RTLD_NOW | RTLD_LOCAL) and binds the
// symbols; 0 on success, else -1 with dlerror (or the missing symbol) in err.
int hk_nvml_open(const char *path, char *err, size_t errlen);

// Each returns an nvmlReturn_t; HK_NVML_MISSING when the library lacks it.
#define HK_NVML_MISSING (-4242)
int hk_nvmlInit(void);
int hk_nvmlShutdown(void);
const char *hk_nvmlErrorString(int r);
int hk_nvmlDeviceGetHandleByUUID(const char *uuid, hk_nvml_dev *dev);
int hk_nvmlDeviceGetHandleByPciBusId(const char *bus, hk_nvml_dev *dev);
int hk_nvmlDeviceGetName(hk_nvml_dev dev, char *buf, unsigned int n);
int hk_nvmlDeviceGetUUID(hk_nvml_dev dev, char *buf, unsigned int n);
int hk_nvmlDeviceGetClockInfo(hk_nvml_dev dev, int type, unsigned int *mhz);
int hk_nvmlDeviceGetCurrentClocksEventReasons(hk_nvml_dev dev, unsigned long long *reasons);
int hk_nvmlDeviceGetTemperature(hk_nvml_dev dev, int sensor, unsigned int *c);
int hk_nvmlDeviceGetPowerUsage(hk_nvml_dev dev, unsigned int *mw);
int hk_nvmlDeviceGetTotalEccErrors(hk_nvml_dev dev, int errType, int counterType, unsigned long long *n);
int hk_nvmlDeviceGetNvLinkState(hk_nvml_dev dev, unsigned int link, int *state);
int hk_nvmlDeviceGetNvLinkErrorCounter(hk_nvml_dev dev, unsigned int link, int counter, unsigned long long *n);

#endif
