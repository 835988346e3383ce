package rings

// Adding a device: its consumers, one per hook, and their first limits;
// retiring its finalized communicators.

import (
	"errors"
	"fmt"

	"github.com/ncclhooks/ncclhooks/internal/backend"
	"github.com/ncclhooks/ncclhooks/internal/hookgen"
)

type device struct {
	dev       backend.Device
	mod       *hookgen.Module
	ordinal   int
	ctl       []uint64
	agg       []uint64
	consumers []*consumer
	retired   *retirements // communicators finalized (Retire)
	// settledBy counts, by slot, the consumers that settled its retired
	// regions; released how often each slot's block was reset for reuse
	// (ReleaseComm, once all have). Under passMu.
	settledBy, released []uint64
	releaseErr          bool // a failed ReleaseComm was logged
	ctlErr              bool // a failed ReadCtl was logged
	ctlFailed           bool // the last ReadCtl failed: its host memory is not read (burst, lightPass)
	aggErr              bool // a failed ReadAgg or decode was logged
	// lastHeads are the heads of the last successful read; settledHeads
	// those of the last final pass (nil before one).
	lastHeads, settledHeads []uint64
	shutdownLogged          bool // the driver's shutdown was logged
}

// Add starts draining one loaded device. Its consumers start at the
// device's current heads: positions reserved before Add were decided by an
// earlier drainer (a previous init/finalize cycle of the same process), so
// Add must come before the hook is handed to NCCL on a fresh device.
// Devices may be added while the drainer runs.
func (d *Drainer) Add(dev backend.Device, m *hookgen.Module) error {
	d.passMu.Lock()
	defer d.passMu.Unlock()
	if d.closed {
		return errors.New("rings: Add after Close")
	}
	for _, x := range *d.devices.Load() {
		if x.dev == dev || x.ordinal == dev.Ordinal() {
			return fmt.Errorf("rings: device %d added twice", dev.Ordinal())
		}
	}
	dv := &device{
		dev:     dev,
		mod:     m,
		ordinal: dev.Ordinal(),
		ctl:     make([]uint64, m.CtlWords()),
		agg:     make([]uint64, m.AggWords),
		retired: newRetirements(),
	}
	if err := dev.ReadCtl(dv.ctl); err != nil {
		return fmt.Errorf("rings: device %d: reading heads: %w", dv.ordinal, err)
	}
	ringCap := d.opts.RingCapacity
	if ringCap <= 0 && m.Profile != nil {
		ringCap = m.Profile.Output.RingCapacity
	}
	if ringCap <= 0 {
		ringCap = DefaultRingCapacity
	}
	for h, info := range m.Hooks {
		k, err := newConsumer(info, dv.ordinal, dev.Slots(h), dev.Holes(h), dv.ctl[h], ringCap)
		if err != nil {
			return fmt.Errorf("rings: %w", err)
		}
		k.setLimit = func(l uint64) error { return dev.WriteLimit(h, l) }
		if k.work {
			k.regionsOf = func(comm int) []uint64 { return dev.Regions(comm, h) }
			k.comms = dev.Comms
			k.retirements, k.retireID = dv.retired, dv.retired.subscribe()
			k.commIndex = dev.CommIndex
			k.released = &dv.released
			k.settled = func(slot int) { d.settledSlot(dv, slot) }
			if info.Hook != nil && info.Hook.DrainAggregates() {
				k.drainAggs = newDrainAggs(m, info.Name, dv.agg)
			}
		}
		if k.dropNewest && !k.work { // work positions have no limit: the drain decides (work.go)
			scratch := make([]uint64, len(dv.ctl))
			k.readHead = func() (uint64, error) {
				if err := dev.ReadCtl(scratch); err != nil {
					return 0, err
				}
				return scratch[h], nil
			}
			// Nothing may be written before the first limit: set it now.
			k.limit = dv.ctl[len(m.Hooks)+h]
			k.limitTried = k.limit
			k.publishLimit()
			if k.limit < k.pos+k.n {
				return fmt.Errorf("rings: device %d hook %q: writing the buffer limit failed", dv.ordinal, info.Name)
			}
		}
		dv.consumers = append(dv.consumers, k)
	}
	list := append(append([]*device(nil), *d.devices.Load()...), dv)
	d.devices.Store(&list)
	return nil
}

// Retire says that the communicator of slot comm of device ordinal was
// finalized: its hooks no longer run. Its context block is then released
// for reuse (backend.Device.ReleaseComm): at once where the records lie in
// the shared buffers, which the block does not hold; with work positions,
// once every hook's regions in it are settled, at the next pass, as the
// final drain settles every region (a process that makes and finalizes
// communicators one after another polls only those alive, and reuses
// their blocks). It does not wait for that pass, and does nothing for a
// device not added.
func (d *Drainer) Retire(ordinal, comm int) {
	for _, dv := range *d.devices.Load() {
		if dv.ordinal != ordinal {
			continue
		}
		if dv.mod.Work {
			dv.retired.add(comm)
			continue
		}
		d.release(dv, comm)
	}
}

// settledSlot counts one consumer of dv that settled slot's retired
// regions; the last one releases the block (passMu held).
func (d *Drainer) settledSlot(dv *device, slot int) {
	for len(dv.settledBy) <= slot {
		dv.settledBy, dv.released = append(dv.settledBy, 0), append(dv.released, 0)
	}
	dv.settledBy[slot]++
	work := 0
	for _, k := range dv.consumers {
		if k.work {
			work++
		}
	}
	if dv.settledBy[slot] < uint64(work) {
		return
	}
	dv.settledBy[slot] = 0
	if d.release(dv, slot) {
		// Its cursors are made again, on the reset block (addRegions).
		dv.released[slot]++
	}
}

// release hands slot's block back to the device for reuse; false (logged
// once) when the device refused it, which then keeps the block.
func (d *Drainer) release(dv *device, slot int) bool {
	err := dv.dev.ReleaseComm(slot)
	if err != nil && !dv.releaseErr {
		dv.releaseErr = true
		d.log(LogWarn, fmt.Sprintf("ncclhooks: device %d: the context block of a finalized communicator (slot %d) is not reused, a new one is made for the next: %v", dv.ordinal, slot, err))
	}
	return err == nil
}

// Retired is how many communicators of device ordinal were retired so far
// (Retire) with work positions, the last one's slot (-1: none), and how
// many entries the work consumers' queues of them hold: those not taken
// yet, whatever the count.
func (d *Drainer) Retired(ordinal int) (total, last, queued int) {
	for _, dv := range *d.devices.Load() {
		if dv.ordinal == ordinal {
			return dv.retired.counts()
		}
	}
	return 0, -1, 0
}
