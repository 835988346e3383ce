// Package harness plays NCCL's part against the built plugin, the way NCCL
// with the device hook (pull request 2285) would: it dlopens
// libnccl-profiler-hooks.so, calls init for several communicators on several
// devices, asks getDeviceHook for each device, calls the hook at START and
// STOP around real work from one thread per channel (cpu) or from a kernel
// modelled on ncclKernelMain (gpu, package harness/gpu), finalizes, and then
// checks the plugin's output against what it emitted. It is a package of its
// own because nothing else in the project plays NCCL.
package harness

/*
#cgo CFLAGS: -O2 -Wall -pthread -I${SRCDIR}/../abi
#cgo LDFLAGS: -ldl -pthread -rdynamic
#include <stdlib.h>
#include "harness.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/ncclhooks/ncclhooks/internal/abi"
)

// Plugin is the loaded profiler plugin. A process loads it once: NCCL's
// plugin keeps process-wide state, and so does ours.
type Plugin struct {
	Path    string
	Version int // the ncclProfiler_vN struct found: 7, 6 or 5
}

// Comm is the context init returned for one communicator.
type Comm struct {
	ctx    unsafe.Pointer
	Device int
}

var (
	openOnce sync.Once
	opened   *Plugin
	openErr  error
)

// Open dlopens the plugin (once per process) and finds its newest profiler
// struct, as NCCL does. Set the NCCL_HOOKS_* environment before calling it.
func Open(path string) (*Plugin, error) {
	openOnce.Do(func() {
		cs := C.CString(path)
		defer C.free(unsafe.Pointer(cs))
		var buf [1024]C.char
		if C.hh_open(cs, &buf[0], C.int(len(buf))) != 0 {
			openErr = fmt.Errorf("loading plugin: %s", C.GoString(&buf[0]))
			return
		}
		opened = &Plugin{Path: path, Version: int(C.hh_version())}
	})
	if opened != nil && opened.Path != path {
		return nil, fmt.Errorf("plugin %s already loaded in this process; cannot load %s", opened.Path, path)
	}
	return opened, openErr
}

// Init calls the plugin's init for one communicator.
func (p *Plugin) Init(commID uint64, name string, device, nNodes, nRanks, rank int) (*Comm, error) {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	var ctx unsafe.Pointer
	if rc := C.hh_init(&ctx, C.uint64_t(commID), cs, C.int(nNodes), C.int(nRanks), C.int(rank)); rc != 0 {
		return nil, fmt.Errorf("plugin init returned %d", rc)
	}
	return &Comm{ctx: ctx, Device: device}, nil
}

// InitWithHook calls init for one communicator and then getDeviceHook for
// its device, in one C call so that both run on one thread, as in NCCL.
func (p *Plugin) InitWithHook(commID uint64, name string, device, nNodes, nRanks, rank int) (c *Comm, hook, ctx uintptr, err error) {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	var pctx, h, dc unsafe.Pointer
	if rc := C.hh_init_with_hook(&pctx, C.uint64_t(commID), cs, C.int(nNodes), C.int(nRanks), C.int(rank), C.int(device), &h, &dc); rc != 0 {
		return nil, 0, 0, fmt.Errorf("plugin init or getDeviceHook returned %d", rc)
	}
	return &Comm{ctx: pctx, Device: device}, uintptr(h), uintptr(dc), nil
}

// DeviceHook calls getDeviceHook for a device (v7 only; older versions have
// no device hook and give 0, 0).
func (p *Plugin) DeviceHook(dev int) (hook, ctx uintptr, err error) {
	var h, c unsafe.Pointer
	if rc := C.hh_get_device_hook(C.int(dev), &h, &c); rc != 0 {
		return 0, 0, fmt.Errorf("getDeviceHook(%d) returned %d", dev, rc)
	}
	return uintptr(h), uintptr(c), nil
}

// Finalize calls the plugin's finalize for a communicator.
func (p *Plugin) Finalize(c *Comm) error {
	if rc := C.hh_finalize(c.ctx); rc != 0 {
		return fmt.Errorf("plugin finalize returned %d", rc)
	}
	return nil
}

// TakeLog returns and clears what the plugin logged through the NCCL logger
// the harness passed to init, one "WARN msg" or "INFO msg" per line.
func TakeLog() string {
	buf := make([]byte, 1<<20)
	n := C.hh_log_take((*C.char)(unsafe.Pointer(&buf[0])), C.int(len(buf)))
	return string(buf[:n])
}

// FuncName is the harness's ncclProfilerDevFuncName.
func FuncName(id uint32) string {
	p := C.ncclProfilerDevFuncName(C.int(id))
	if p == nil {
		return ""
	}
	return C.GoString(p)
}

// FuncCount is the number of function ids the harness names.
func FuncCount() int { return int(C.hh_func_count()) }

// Event is one event the harness passed to a hook, and the communicator
// whose hook it was.
type Event struct {
	abi.DevEvent
	Comm int // the communicator's index on its device (the order of its getDeviceHook)
}

// cpuChannel describes one channel thread of the cpu harness.
type cpuChannel struct {
	Hook, Ctx   uintptr
	Comm        int // the communicator's index on its device
	Channel     int
	CounterBase uint64 // the first work item's counter (firstCounter: never 0)
	Items       int
	Batch       int
	WorkFloats  int
	Slowdown    float64
	FuncIDs     []uint32
	FuncOffset  int
	Log         bool
	Arrive      unsafe.Pointer // the barrier's count of this (communicator, channel); nil: none
	NRanks      int            // ranks that arrive at each collective
	Delay       time.Duration  // a straggler's lateness at each batch
	// HoldAt and HoldMax: see hh_channel_t (runCPUChannels' midRun).
	HoldAt, HoldMax int
}

// runCPUChannels runs one OS thread per channel, released together, and
// returns each channel's event log (when asked for) and the work items it
// emitted. With midRun, every channel holds at its HoldAt (emitting while
// held) until midRun, called once all have reached it, returns.
func runCPUChannels(chs []cpuChannel, midRun func() error) ([][]Event, []int, error) {
	n := len(chs)
	var hold, reached *C.int
	midErr := make(chan error, 1)
	if midRun != nil {
		words := (*C.int)(C.calloc(2, C.sizeof_int))
		defer C.free(unsafe.Pointer(words))
		hold, reached = words, (*C.int)(unsafe.Add(unsafe.Pointer(words), C.sizeof_int))
		*hold = 1
	}
	cs := (*[1 << 20]C.hh_channel_t)(C.calloc(C.size_t(n), C.sizeof_hh_channel_t))[:n:n]
	defer C.free(unsafe.Pointer(&cs[0]))
	var allocs []unsafe.Pointer
	defer func() {
		for _, p := range allocs {
			C.free(p)
		}
	}()
	for i, ch := range chs {
		if len(ch.FuncIDs) == 0 {
			return nil, nil, errors.New("harness: no function ids")
		}
		ids := (*C.uint32_t)(C.calloc(C.size_t(len(ch.FuncIDs)), 4))
		allocs = append(allocs, unsafe.Pointer(ids))
		copy(unsafe.Slice((*uint32)(unsafe.Pointer(ids)), len(ch.FuncIDs)), ch.FuncIDs)
		c := &cs[i]
		c.hook = uintptrToPointer(ch.Hook)
		c.ctx = uintptrToPointer(ch.Ctx)
		c.channel = C.int(ch.Channel)
		c.counterBase = C.uint64_t(ch.CounterBase)
		c.items = C.int(ch.Items)
		c.batch = C.int(ch.Batch)
		c.workFloats = C.int(ch.WorkFloats)
		c.slowdown = C.double(ch.Slowdown)
		c.funcIds = ids
		c.nFuncIds = C.int(len(ch.FuncIDs))
		c.funcOffset = C.int(ch.FuncOffset)
		c.arrive = (*C.uint32_t)(ch.Arrive)
		c.nranks = C.int(ch.NRanks)
		c.delayNs = C.uint64_t(ch.Delay.Nanoseconds())
		if hold != nil {
			c.hold, c.reached = hold, reached
			c.holdAt, c.holdMax = C.int(ch.HoldAt), C.int(ch.HoldMax)
		}
		if ch.Log {
			l := C.calloc(C.size_t(2*(ch.Items+max(ch.HoldMax, 0))), C.sizeof_ncclProfilerDevEvent_t)
			if l == nil {
				return nil, nil, errors.New("harness: out of memory for the event log")
			}
			allocs = append(allocs, l)
			c.log = (*C.ncclProfilerDevEvent_t)(l)
		}
	}
	if hold != nil {
		go func() {
			// Released whatever midRun does: the channels must end.
			defer atomicStoreInt(hold, 0)
			for atomicLoadInt(reached) < int32(n) {
				time.Sleep(time.Millisecond)
			}
			midErr <- midRun()
		}()
	} else {
		midErr <- nil
	}
	if rc := C.hh_run_channels(&cs[0], C.int(n)); rc != 0 {
		return nil, nil, fmt.Errorf("harness: running channels failed (%d): batch must be 1..64", rc)
	}
	if err := <-midErr; err != nil {
		return nil, nil, fmt.Errorf("harness: mid-run: %w", err)
	}
	items := make([]int, n)
	for i := range chs {
		items[i] = chs[i].Items + int(cs[i].holdDone)
	}
	for i := range chs {
		if cs[i].timedOut != 0 {
			return nil, nil, fmt.Errorf("harness: communicator %d channel %d: a rank did not start a collective within 2 minutes: did one of the job's processes fail?", chs[i].Comm, chs[i].Channel)
		}
	}
	logs := make([][]Event, n)
	for i := range chs {
		if cs[i].log == nil {
			continue
		}
		// abi.DevEvent is ncclProfilerDevEvent_t's layout (abi's tests).
		raw := unsafe.Slice((*abi.DevEvent)(unsafe.Pointer(cs[i].log)), 2*items[i])
		evs := make([]Event, len(raw))
		for k, e := range raw {
			evs[k] = Event{e, chs[i].Comm}
		}
		logs[i] = evs
	}
	return logs, items, nil
}

// atomicLoadInt and atomicStoreInt access a C int that C threads share.
func atomicLoadInt(p *C.int) int32     { return atomic.LoadInt32((*int32)(unsafe.Pointer(p))) }
func atomicStoreInt(p *C.int, v int32) { atomic.StoreInt32((*int32)(unsafe.Pointer(p)), v) }

// uintptrToPointer converts a C address (a hook or context the plugin
// returned; not Go memory) for passing back to C.
func uintptrToPointer(p uintptr) unsafe.Pointer {
	return *(*unsafe.Pointer)(unsafe.Pointer(&p))
}
