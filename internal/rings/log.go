package rings

// Logging: the one-time drop warning, device read failures and sink errors.

import (
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/ncclhooks/ncclhooks/internal/backend"
)

// warnedDrop makes the first drop in the process log one WARN, whichever
// drainer, hook and device it happens on.
var warnedDrop atomic.Bool

// logReadFailure logs, once per device, that it can no longer be read. At
// process exit the CUDA driver shuts down under the drainer: after a final
// dump with nothing new since, that is expected and only worth an INFO line;
// before one, records may be lost, which is worth a WARN.
func (d *Drainer) logReadFailure(dv *device, err error, warning string) {
	if errors.Is(err, backend.ErrShutdown) {
		if dv.shutdownLogged {
			return
		}
		dv.shutdownLogged = true
		if d.settledClean(dv) {
			d.log(LogInfo, fmt.Sprintf("ncclhooks: device %d: the CUDA driver shut down (process exit) after the final dump: draining stopped, nothing was lost", dv.ordinal))
			return
		}
		d.log(LogWarn, fmt.Sprintf("ncclhooks: device %d: the CUDA driver shut down (process exit) before the last communicator was finalized: records since the last dump are not in the output (%v)", dv.ordinal, err))
		return
	}
	d.log(LogWarn, fmt.Sprintf("ncclhooks: device %d: %s: %v", dv.ordinal, warning, err))
}

// settledClean reports whether a final dump covered every position the
// device's hooks had reserved when the drainer last read them.
func (d *Drainer) settledClean(dv *device) bool {
	return dv.settledHeads != nil && slices.Equal(dv.settledHeads, dv.lastHeads)
}

// noteDrop logs the first drop of the process (passMu held).
func (d *Drainer) noteDrop(k *consumer, s stage, n uint64) {
	if n == 0 || warnedDrop.Load() || !warnedDrop.CompareAndSwap(false, true) {
		return
	}
	d.log(LogWarn, dropWarning(k, s, n, d.opts.TornTimeout))
}

func dropWarning(k *consumer, s stage, n uint64, tornTimeout time.Duration) string {
	where := ""
	if h := k.info.Hook; h != nil && h.Buffer.Pos.Line > 0 {
		where = " (" + h.Buffer.Pos.String() + ")"
	}
	slots := fmt.Sprintf("raise buffer.slots of hook %q in the profile%s (now %d)", k.info.Name, where, k.n)
	if k.work {
		slots = fmt.Sprintf("raise buffer.slots of hook %q in the profile%s (now %d: %d per channel region)", k.info.Name, where, k.info.Slots, k.n)
	}
	var what string
	switch s {
	case stageBufferFull:
		what = "device buffer full (drop_newest): the drain did not keep up; " + slots
		if k.work {
			what = "a channel's region lapped before the drain read it (drop_newest, decided by the drain); " + slots
		}
	case stageOverwritten:
		what = "overwritten in the device buffer (overwrite_oldest) before the drain read it; " + slots
	case stageTorn:
		what = fmt.Sprintf("torn: a writer reserved a slot and did not complete it within %v (preempted or killed); if it repeats, %s", tornTimeout, slots)
	case stageRingFull:
		what = fmt.Sprintf("host ring full: the sinks did not keep up; raise output.ring_capacity in the profile (now %d)", k.ring.Cap())
	}
	return fmt.Sprintf("ncclhooks: hook %q on device %d dropped %d record(s): %s. Every drop is counted in the dump_stats lines (dropped_*_total); this warning is not repeated in this process.",
		k.info.Name, k.device, n, what)
}

func (d *Drainer) log(level int, msg string) {
	if d.opts.Log != nil {
		d.opts.Log(level, msg)
	}
}

// sinkDo logs the first sink error; the drain goes on (deliverMu held).
func (d *Drainer) sinkDo(what string, err error) {
	if err != nil && !d.sinkErr {
		d.sinkErr = true
		d.log(LogWarn, fmt.Sprintf("ncclhooks: output %s failed (every record is still counted, later errors are not logged): %v", what, err))
	}
}
