package lifecycle

import (
	"fmt"
	"time"

	"github.com/ncclhooks/ncclhooks/internal/backend"
	"github.com/ncclhooks/ncclhooks/internal/backend/cpu"
	"github.com/ncclhooks/ncclhooks/internal/config"
	"github.com/ncclhooks/ncclhooks/internal/cuda"
)

// HostHook is what the plugin's C side feeds a communicator's host events
// to: the hook module's entry, compiled for the host, and the
// communicator's context.
type HostHook struct {
	Entry, Ctx uintptr
}

// chooseSource decides, at the first init, where the hooks' events come
// from. NCCL calls init before it could offer a device hook, and asks for
// host events only through init's activation mask, so the choice is made
// here: auto takes the device hook when NCCL has it (it exports
// ncclProfilerDevFuncName, as NCCL with pull request 2285 does), else NCCL's
// host events. Asking for both would make NCCL produce kernel-channel events
// that no one reads on every communicator that gets a device hook.
func (s *Session) chooseSource() {
	switch s.knobs.Source {
	case "host":
		s.host = true
	case "device":
	default:
		s.host = !s.env.DeviceHookNCCL()
	}
	var lib NCCLLibrary
	if s.env.NCCLLibrary != nil {
		lib = s.env.NCCLLibrary()
	}
	nccl := ncclDescription(s.ncclName(lib), s.version)
	if !s.host {
		s.env.Log(LogInfo, fmt.Sprintf("ncclhooks: %s: the hooks run in NCCL's kernels (device hook; NCCL_HOOKS_SOURCE=%s)", nccl, s.knobs.Source))
		return
	}
	if err := config.CheckHostSource(s.profile); err != nil {
		s.refuse(fmt.Sprintf("%s: the profile cannot run on NCCL's host events (NCCL_HOOKS_SOURCE=%s): remove what they do not carry, or run NCCL with the device hook:\n%v",
			nccl, s.knobs.Source, err))
		return
	}
	start := time.Now()
	c, err := cpu.Compile(s.module, s.knobs.CC, s.knobs.CCTimeout)
	if err != nil {
		s.refuse(fmt.Sprintf("%s: host-event source: compiling the hooks for the host (NCCL_HOOKS_CC): %v", nccl, err))
		return
	}
	s.compiled = hostCompiled{c}
	s.knobs.Backend = "host"
	s.env.Log(LogInfo, fmt.Sprintf("ncclhooks: %s: the hooks run on NCCL's host events (kernel channels with their GPU timers; NCCL_HOOKS_SOURCE=%s), compiled in %v: %s",
		nccl, s.knobs.Source, time.Since(start).Round(time.Microsecond), c.Info()))
}

// ncclDescription says which NCCL (ncclName) loaded which of the plugin's
// structs.
func ncclDescription(nccl string, profilerVersion int) string {
	if profilerVersion > 0 {
		nccl += fmt.Sprintf(" loaded ncclProfiler_v%d", profilerVersion)
	}
	return nccl
}

func (s *Session) sourceName() string {
	if s.host {
		return "host events"
	}
	return "device hook"
}

// HostHook returns what communicator id's host events feed, loading the
// module on device ord first. host is false when the hooks do not run on
// host events (then NCCL is asked for none); true with a zero HostHook when
// only this communicator goes without (it ignores its events).
func (s *Session) HostHook(id uint64, ord int) (hh HostHook, host bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.host || s.inactive != "" {
		return HostHook{}, false
	}
	c := s.comms[id]
	if c == nil {
		return HostHook{}, true
	}
	d, ok := s.devices[ord]
	if !ok {
		s.identifyDevice(ord, c)
		if d = s.loadDevice(ord); d == nil {
			return HostHook{}, s.inactive == ""
		}
	}
	ctx, _, _, ok := s.attach(d, ord, c)
	if !ok {
		return HostHook{}, true
	}
	return HostHook{Entry: d.Entry(), Ctx: ctx}, true
}

// hostCompiled loads the host-compiled hooks as the devices whose events
// they are fed: the hooks run on the host, but the events (and their
// timestamps, the GPU's timer) are the GPU's, so the device and clock lines
// must name the GPU, not the CPU the cpu backend would name.
type hostCompiled struct{ backend.Compiled }

func (c hostCompiled) Load(ord int) (backend.Device, error) {
	d, err := c.Compiled.Load(ord)
	if err != nil {
		return nil, err
	}
	return hostEventDevice{d, gpuIdentity(ord)}, nil
}

// hostEventDevice is a cpu device fed a GPU's host events.
type hostEventDevice struct {
	backend.Device
	id backend.Identity
}

func (d hostEventDevice) Identity() backend.Identity { return d.id }
func (d hostEventDevice) Model() string              { return d.id.Name }

// gpuIdentity names CUDA device ord from the driver; without a usable
// driver (a test's stand-in for NCCL), "host events" and no UUID.
func gpuIdentity(ord int) backend.Identity {
	unknown := backend.Identity{Name: "host events"}
	lib, err := cuda.Open()
	if err != nil {
		return unknown
	}
	dev, err := lib.Device(ord)
	if err != nil {
		return unknown
	}
	defer dev.Close() // releases only this retain of the primary context NCCL holds
	return backend.Identity{Name: dev.Name, UUID: dev.UUID, PCIBusID: dev.PCIBusID}
}
