package cpu

/*
#cgo CFLAGS: -I${SRCDIR}/../../abi
#include "switch.h"
*/
import "C"

import (
	"errors"
	"unsafe"

	"github.com/ncclhooks/ncclhooks/internal/backend"
)

// Switch is the cpu backend's backend.Switch: hk_switch_entry, a host
// function of the plugin's own image (always loaded, whatever module is
// active), and slots of C memory, each a pointer to an immutable
// {entry, ctx} pair that Set replaces with one release store. Nothing it
// makes is ever freed: a caller descheduled between loading a slot and
// calling its pair may run the previous module's entry at any later time,
// so neither the pairs nor the modules they name may go (the session keeps
// every module loaded).
type Switch struct{}

var _ backend.Switch = Switch{}

// Entry is hk_switch_entry, the same on every simulated device.
func (Switch) Entry(int) (uintptr, error) { return uintptr(C.hk_switch_entry), nil }

// NewSlot allocates a slot that calls nothing.
func (Switch) NewSlot(int) (uintptr, error) {
	p := C.hk_switch_slot()
	if p == nil {
		return 0, errors.New("cpu backend: out of memory for a switch slot")
	}
	return uintptr(p), nil
}

// Set publishes entry and ctx in slot.
func (Switch) Set(_ int, slot, entry, ctx uintptr) error {
	if C.hk_switch_set(ptr(slot), ptr(entry), ptr(ctx)) != 0 {
		return errors.New("cpu backend: out of memory for a switch pair")
	}
	return nil
}

// ptr converts a C address (not Go memory) for passing to C.
func ptr(p uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&p)) }
