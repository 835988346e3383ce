package report

// // record lines: work items from START/STOP pairs, and the dump_stats and capture accounting.

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/ncclhooks/ncclhooks/internal/abi"
	"github.com/ncclhooks/ncclhooks/internal/schema"
)

// pairKey identifies a work item within one file (one process).
type pairKey struct {
	hook    string
	device  int
	comm    int // -1 when not recorded
	channel int
	counter uint64
}

type pendingStart struct {
	ts     uint64
	funcID int64
	fn     string
}

func (r *reader) record(index int, f *File, pending map[pairKey][]pendingStart) error {
	o := &r.obj
	hookName := o.str("hook")
	if hookName == "" {
		return errors.New(`record line has no "hook"`)
	}
	dev, ok := o.int("device")
	if !ok {
		return errors.New(`record line has no integer "device"`)
	}
	hc := r.run.hook(hookName)
	hc.Records++

	key := func(src string) string { return f.source(hookName, src) }
	item := WorkItem{File: index, Hook: hookName, Device: int(dev), Comm: -1, Channel: -1, FuncID: -1, Func: o.str("func")}
	if c, ok := o.uint(key("comm")); ok {
		item.Comm = int(c)
	}
	if ch, ok := o.uint(key("channelId")); ok {
		item.Channel = int(ch)
	}
	if id, ok := o.uint(key("funcId")); ok {
		item.FuncID = int64(id)
	}
	item.WorkCounter, item.HasCounter = o.uint(key("workCounter"))
	ts, hasTS := o.uint(key("timestamp"))
	phase, hasPhase := o.uint(key("phase"))

	// A recorded duration (computed on the device) wins over pairing.
	if dur, ok := o.uint(key("duration")); ok {
		if hasPhase && phase != abi.PhaseStop {
			return nil
		}
		paired, hasPaired := o.uint(key("paired"))
		if dur == 0 || (hasPaired && paired == 0) {
			hc.UnpairedStops++
			return nil
		}
		item.Duration = dur
		if hasTS && ts >= dur {
			item.Start, item.Stop, item.HasTime = ts-dur, ts, true
		}
		hc.Items++
		r.emit(&item)
		return nil
	}
	if !hasPhase || !hasTS || !item.HasCounter {
		return nil // nothing to pair: the hook records no timing
	}
	k := pairKey{hook: hookName, device: item.Device, comm: item.Comm, channel: item.Channel, counter: item.WorkCounter}
	switch phase {
	case abi.PhaseStart:
		pending[k] = append(pending[k], pendingStart{ts: ts, funcID: item.FuncID, fn: item.Func})
	case abi.PhaseStop:
		r.pairStop(hc, pending, k, &item, ts)
	}
	return nil
}

// pairStop pairs a STOP with the START waiting under its key. Several STARTs
// wait under one key when communicators on the same device run the same
// channel and workCounter concurrently (or a STOP was dropped): the latest
// START before this STOP is taken, so that a stale START whose STOP was lost
// stays unpaired instead of turning into an outlier; the pairing is counted
// as ambiguous.
func (r *reader) pairStop(hc *HookCounts, pending map[pairKey][]pendingStart, k pairKey, item *WorkItem, ts uint64) {
	q := pending[k]
	i := len(q) - 1
	for i >= 0 && q[i].ts > ts {
		i--
	}
	if i < 0 {
		hc.UnpairedStops++
		return
	}
	if len(q) > 1 {
		hc.Ambiguous++
	}
	st := q[i]
	if q = append(q[:i], q[i+1:]...); len(q) == 0 {
		delete(pending, k)
	} else {
		pending[k] = q
	}
	if item.FuncID < 0 {
		item.FuncID, item.Func = st.funcID, st.fn
	}
	item.Start, item.Stop, item.HasTime, item.Duration = st.ts, ts, true, ts-st.ts
	hc.Items++
	r.emit(item)
}

func (r *reader) emit(w *WorkItem) {
	if r.onItem != nil {
		r.onItem(w)
	}
}

// dumpStats reads a dump_stats line (few per file: encoding/json into the
// schema's struct, after the flat parse checked the keys it cannot do without).
func (r *reader) dumpStats(index, epoch int, line []byte) error {
	o := &r.obj
	if _, ok := o.int("device"); o.str("hook") == "" || !ok {
		return errors.New(`dump_stats line needs "hook" and integer "device"`)
	}
	for _, k := range []string{"records_total", "dropped_total"} {
		if _, ok := o.get(k); !ok {
			return fmt.Errorf("dump_stats line has no %q", k)
		}
	}
	var l schema.DumpStats
	if err := json.Unmarshal(line, &l); err != nil {
		return fmt.Errorf("dump_stats line: %v", err)
	}
	s := DumpStats{File: index, Epoch: epoch, DumpStats: l}
	r.run.Hooks[s.Hook] = r.run.hook(s.Hook)
	r.run.Stats = append(r.run.Stats, s)
	return nil
}

// Capture is a capture ratio: records / (records + drops), from the last
// dump_stats line of every (file, hook, device).
type Capture struct {
	Records uint64 `json:"records"`
	Dropped uint64 `json:"dropped"`
	// Matched is the events the hook matched: records + drops for a hook
	// that records, what its aggregates counted for one that only
	// aggregates (it has no records to capture).
	Matched uint64 `json:"matched"`
	// Ratio is records / (records + drops); 1 where there is neither,
	// nothing having been lost (Captured says whether anything was).
	Ratio float64 `json:"ratio"`
	// Final is false when some file has no final dump (the run was cut short).
	Final bool `json:"final"`
}

// Capture returns the capture ratio of one hook; ok is false when the
// inputs have no dump_stats line for it. A file's profile epochs (a live
// reload) count apart: each epoch's totals start from zero.
func (r *Run) Capture(hook string) (c Capture, ok bool) {
	type fd struct{ file, epoch, device int }
	last := map[fd]DumpStats{}
	settled := map[fd]bool{} // a final dump was written (the plugin keeps dumping after it)
	for _, s := range r.Stats {
		if s.Hook != hook {
			continue
		}
		k := fd{s.File, s.Epoch, s.Device}
		if prev, seen := last[k]; !seen || s.Dump >= prev.Dump {
			last[k] = s
		}
		settled[k] = settled[k] || s.Final
	}
	if len(last) == 0 {
		return Capture{}, false
	}
	c.Final = true
	for k, s := range last {
		c.Records += s.Records
		c.Dropped += s.Dropped
		c.Matched += s.Matched
		c.Final = c.Final && settled[k]
	}
	if sum := c.Records + c.Dropped; sum > 0 {
		c.Ratio = float64(c.Records) / float64(sum)
	} else {
		c.Ratio = 1
	}
	return c, true
}

// Captured says whether the hook had records to capture: false for 0
// records and 0 drops, whose ratio means nothing.
func (c Capture) Captured() bool { return c.Records+c.Dropped > 0 }
