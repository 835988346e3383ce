#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "hk_nvml.h"

static struct {
	void *init, *shutdown, *errorString, *byUUID, *byPci, *name, *uuid, *clock, *reasons, *temp, *power,
	    *ecc, *linkState, *linkErrors;
} t;

#define F(field, ...) ((int (*)(__VA_ARGS__))t.field)
#define NEED(field) \
	if (!t.field) return HK_NVML_MISSING

static void *first(void *lib, const char *a, const char *b) {
	void *p = dlsym(lib, a);
	return p || !b ? p : dlsym(lib, b);
}

int hk_nvml_open(const char *path, char *err, size_t errlen) {
	void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		const char *e = dlerror();
		snprintf(err, errlen, "%s", e ? e : "dlopen failed");
		return -1;
	}
	t.init = first(lib, "nvmlInit_v2", "nvmlInit");
	t.shutdown = first(lib, "nvmlShutdown", NULL);
	t.errorString = first(lib, "nvmlErrorString", NULL);
	if (!t.init || !t.shutdown) {
		snprintf(err, errlen, "%s has no nvmlInit_v2/nvmlShutdown", path);
		dlclose(lib);
		memset(&t, 0, sizeof t);
		return -1;
	}
	t.byUUID = first(lib, "nvmlDeviceGetHandleByUUID", NULL);
	t.byPci = first(lib, "nvmlDeviceGetHandleByPciBusId_v2", "nvmlDeviceGetHandleByPciBusId");
	t.name = first(lib, "nvmlDeviceGetName", NULL);
	t.uuid = first(lib, "nvmlDeviceGetUUID", NULL);
	t.clock = first(lib, "nvmlDeviceGetClockInfo", NULL);
	// Renamed in NVML 12.2; the old name stays in older drivers.
	t.reasons = first(lib, "nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons");
	t.temp = first(lib, "nvmlDeviceGetTemperature", NULL);
	t.power = first(lib, "nvmlDeviceGetPowerUsage", NULL);
	t.ecc = first(lib, "nvmlDeviceGetTotalEccErrors", NULL);
	t.linkState = first(lib, "nvmlDeviceGetNvLinkState", NULL);
	t.linkErrors = first(lib, "nvmlDeviceGetNvLinkErrorCounter", NULL);
	return 0; // the library stays loaded for the process
}

int hk_nvmlInit(void) {
	NEED(init);
	return F(init, void)();
}

int hk_nvmlShutdown(void) {
	NEED(shutdown);
	return F(shutdown, void)();
}

const char *hk_nvmlErrorString(int r) {
	if (!t.errorString) return "unknown NVML error";
	return ((const char *(*)(int))t.errorString)(r);
}

int hk_nvmlDeviceGetHandleByUUID(const char *uuid, hk_nvml_dev *dev) {
	NEED(byUUID);
	return F(byUUID, const char *, hk_nvml_dev *)(uuid, dev);
}

int hk_nvmlDeviceGetHandleByPciBusId(const char *bus, hk_nvml_dev *dev) {
	NEED(byPci);
	return F(byPci, const char *, hk_nvml_dev *)(bus, dev);
}

int hk_nvmlDeviceGetName(hk_nvml_dev dev, char *buf, unsigned int n) {
	NEED(name);
	return F(name, hk_nvml_dev, char *, unsigned int)(dev, buf, n);
}

int hk_nvmlDeviceGetUUID(hk_nvml_dev dev, char *buf, unsigned int n) {
	NEED(uuid);
	return F(uuid, hk_nvml_dev, char *, unsigned int)(dev, buf, n);
}

int hk_nvmlDeviceGetClockInfo(hk_nvml_dev dev, int type, unsigned int *mhz) {
	NEED(clock);
	return F(clock, hk_nvml_dev, int, unsigned int *)(dev, type, mhz);
}

int hk_nvmlDeviceGetCurrentClocksEventReasons(hk_nvml_dev dev, unsigned long long *reasons) {
	NEED(reasons);
	return F(reasons, hk_nvml_dev, unsigned long long *)(dev, reasons);
}

int hk_nvmlDeviceGetTemperature(hk_nvml_dev dev, int sensor, unsigned int *c) {
	NEED(temp);
	return F(temp, hk_nvml_dev, int, unsigned int *)(dev, sensor, c);
}

int hk_nvmlDeviceGetPowerUsage(hk_nvml_dev dev, unsigned int *mw) {
	NEED(power);
	return F(power, hk_nvml_dev, unsigned int *)(dev, mw);
}

int hk_nvmlDeviceGetTotalEccErrors(hk_nvml_dev dev, int errType, int counterType, unsigned long long *n) {
	NEED(ecc);
	return F(ecc, hk_nvml_dev, int, int, unsigned long long *)(dev, errType, counterType, n);
}

int hk_nvmlDeviceGetNvLinkState(hk_nvml_dev dev, unsigned int link, int *state) {
	NEED(linkState);
	return F(linkState, hk_nvml_dev, unsigned int, int *)(dev, link, state);
}

int hk_nvmlDeviceGetNvLinkErrorCounter(hk_nvml_dev dev, unsigned int link, int counter, unsigned long long *n) {
	NEED(linkErrors);
	return F(linkErrors, hk_nvml_dev, unsigned int, int, unsigned long long *)(dev, link, counter, n);
}
