package harness

import (
	"fmt"

	"github.com/ncclhooks/ncclhooks/internal/config"
	"github.com/ncclhooks/ncclhooks/internal/schema"
)

// checkContexts checks what getDeviceHook gave the communicators: one hook
// per device, and a context of its own for every communicator.
func (s *Summary) checkContexts(comms []*comm) {
	hooks := map[int]uintptr{}
	seen := map[uintptr]string{}
	for _, c := range comms {
		if c.hook == 0 {
			continue
		}
		if h, ok := hooks[c.Device]; ok && h != c.hook {
			s.Problems = append(s.Problems, fmt.Sprintf("device %d: communicators got different hooks %#x and %#x", c.Device, h, c.hook))
		}
		hooks[c.Device] = c.hook
		me := fmt.Sprintf("device %d communicator %d", c.Device, c.index)
		if other, ok := seen[c.ctx]; ok {
			s.Problems = append(s.Problems, fmt.Sprintf("%s and %s share the context %#x: each communicator must get its own", other, me, c.ctx))
		}
		seen[c.ctx] = me
	}
}

// check reads the plugin's JSON lines output and compares it with what was
// emitted: records + drops = matched, exactly; matched = the harness's own
// count where the predicate allows computing it; every record's event
// fields equal the event the harness passed.
func (s *Summary) check(prof *config.Profile, logs map[int][]Event, emitted map[int]uint64) error {
	if !s.HookActive {
		return nil
	}
	file, err := outputFile(s.Config.OutputDir)
	if err != nil {
		return err
	}
	return s.checkFile(prof, file, logs, emitted, s.Config.Verify)
}

// CheckFile checks a plugin output file against the events a caller of the
// hooks passed them on each of devices devices (logs and emitted by device;
// a device without a log is checked for accounting only; devices 0: those
// the output names), as Run checks its own runs: callers the harness did not
// build (harness/callers) and real NCCL (ncclhooks check) use it. epochs
// are the profiles a live reload made active (Config.Epochs).
func CheckFile(prof *config.Profile, file string, devices int, logs map[int][]Event, emitted map[int]uint64, epochs ...*config.Profile) (*Summary, error) {
	s := &Summary{Config: Config{Devices: devices, Epochs: epochs}, HookActive: true}
	for d := range devices {
		s.Emitted += emitted[d]
	}
	return s, s.checkFile(prof, file, logs, emitted, true)
}

// checkFile checks the output file; byRecord checks records one by one (with
// the logs, and START/STOP pairs), else only their accounting. A file with
// profile epochs (a live reload) is checked epoch by epoch (checkEpoch),
// then across them (checkAcross).
func (s *Summary) checkFile(prof *config.Profile, file string, logs map[int][]Event, emitted map[int]uint64, byRecord bool) error {
	s.OutputFile = file
	outs, err := readEpochs(file, byRecord)
	if err != nil {
		return err
	}
	out := outs[0]
	if s.Config.Devices <= 0 { // from the output: the devices its comm lines and dump_stats name
		for _, c := range out.comms {
			s.Config.Devices = max(s.Config.Devices, c.Device+1)
		}
		for _, o := range outs {
			for k := range o.final {
				s.Config.Devices = max(s.Config.Devices, k.device+1)
			}
		}
	}
	s.CommLines = map[int]int{}
	for _, c := range out.comms {
		s.CommLines[c.Device]++
	}
	s.checkComms(out, logs)
	if len(outs) == 1 {
		if byRecord {
			s.Pairs = checkPairs(prof, out)
		}
		s.checkEpoch(prof, out, logs, emitted, false)
		return nil
	}
	h, err := ReadHeader(file)
	if err != nil {
		return err
	}
	profs := make([]*config.Profile, len(outs))
	for i, o := range outs {
		hash := h.ProfileHash
		if o.profile != nil {
			hash = o.profile.ProfileHash
		}
		for _, p := range append([]*config.Profile{prof}, s.Config.Epochs...) {
			if p != nil && p.Hash == hash {
				profs[i] = p
			}
		}
		s.checkEpoch(profs[i], o, logs, emitted, true)
	}
	s.Epochs = len(outs)
	s.checkAcross(outs, profs, logs, emitted)
	return nil
}

// checkEpoch checks one profile epoch's lines against prof, the profile it
// ran (nil: not known; then its dump_stats alone, for accounting). partial:
// the epoch saw only some of the events (a live reload switched the hooks
// mid-run), so what it matched is checked across the epochs (checkAcross),
// not against the logs, and pairs and aggregates only for consistency.
func (s *Summary) checkEpoch(prof *config.Profile, out *output, logs map[int][]Event, emitted map[int]uint64, partial bool) {
	if prof == nil {
		s.checkStatsOnly(out)
		return
	}
	aggLogs, predLogs := logs, logs
	if partial {
		aggLogs, predLogs = nil, nil
	}
	aggMatches := s.checkAggregates(prof, aggLogs, out)
	epoch := out.epoch
	for _, h := range prof.EnabledHooks() {
		if why, ok := out.refused[h.Name]; ok {
			s.Refused = append(s.Refused, fmt.Sprintf("hook %q: %s", h.Name, why))
			continue // left out of the device module: no records, no stats
		}
		if len(h.Fields) == 0 && !h.DrainAggregates() {
			// Aggregate only: no records, its aggregates checked above;
			// what it matched is what they counted.
			for d := 0; d < s.Config.Devices; d++ {
				r := aggOnlyRow(h, d, emitted[d], out, aggMatches)
				r.Epoch = epoch
				s.Rows = append(s.Rows, r)
			}
			continue
		}
		pred, predErr := compilePredicate(h)
		for d := 0; d < s.Config.Devices; d++ {
			r := Row{Hook: h.Name, Device: d, Epoch: epoch, Emitted: emitted[d], Expected: -1}
			st, ok := out.final[statKey{h.Name, d}]
			if !ok {
				r.Problems = append(r.Problems, "no final dump_stats line")
				s.Rows = append(s.Rows, r)
				continue
			}
			r.Matched, r.Records, r.Dropped = st.Matched, st.Records, st.Dropped
			r.Stages = fmt.Sprintf("full %d, overwritten %d, torn %d, ring %d",
				st.DroppedBufferFull, st.DroppedOverwritten, st.DroppedTorn, st.DroppedRingFull)
			if st.DroppedWriteFailed > 0 {
				r.Stages += fmt.Sprintf(", write failed %d", st.DroppedWriteFailed)
			}
			if st.DroppedCap > 0 {
				r.Stages += fmt.Sprintf(", cap %d", st.DroppedCap)
			}
			if r.Records+r.Dropped != r.Matched {
				r.Problems = append(r.Problems, fmt.Sprintf("records %d + dropped %d != matched %d", r.Records, r.Dropped, r.Matched))
			}
			if st.DroppedBufferFull+st.DroppedOverwritten+st.DroppedTorn+st.DroppedRingFull+st.DroppedWriteFailed+st.DroppedCap != st.Dropped {
				r.Problems = append(r.Problems, "drops by stage do not add up to dropped_total")
			}
			if st.Pending != 0 {
				r.Problems = append(r.Problems, fmt.Sprintf("%d positions still pending after finalize", st.Pending))
			}
			r.Dumps = len(out.dumps[statKey{h.Name, d}])
			r.Problems = checkDumps(out.dumps[statKey{h.Name, d}], false, r.Problems)
			recs := out.records[statKey{h.Name, d}]
			r.Lines = out.lines[statKey{h.Name, d}]
			switch {
			case h.DrainAggregates():
				if r.Lines != 0 { // its records go to its aggregates
					r.Problems = append(r.Problems, fmt.Sprintf("%d record lines from a hook the drain aggregates", r.Lines))
				}
				r.Problems = checkDrainCounts(h, d, st, out, r.Problems)
			case r.Lines != r.Records:
				r.Problems = append(r.Problems, fmt.Sprintf("%d record lines but records_total %d", r.Lines, r.Records))
			}
			if evs, ok := predLogs[d]; ok && predErr == nil && pred != nil {
				n, err := countMatches(h, pred, evs)
				if err != nil {
					r.Problems = append(r.Problems, err.Error())
				} else {
					r.Expected = int64(n)
					if uint64(n) != r.Matched {
						r.Problems = append(r.Problems, fmt.Sprintf("harness expects %d matches, plugin matched %d", n, r.Matched))
					}
				}
			}
			if evs, ok := logs[d]; ok {
				r.Checked, r.Problems = checkRecords(h, recs, evs, r.Problems)
			}
			s.Rows = append(s.Rows, r)
		}
	}
}

// checkComms checks the comm lines: per device, indices 0, 1, ... once each,
// and one for every communicator that emitted events.
func (s *Summary) checkComms(out *output, logs map[int][]Event) {
	byDev := map[int]map[int]bool{}
	for _, c := range out.comms {
		if byDev[c.Device] == nil {
			byDev[c.Device] = map[int]bool{}
		}
		if byDev[c.Device][c.Comm] {
			s.Problems = append(s.Problems, fmt.Sprintf("device %d: comm %d has two comm lines", c.Device, c.Comm))
		}
		byDev[c.Device][c.Comm] = true
	}
	for d, set := range byDev {
		for i := range len(set) {
			if !set[i] {
				s.Problems = append(s.Problems, fmt.Sprintf("device %d: comm indices are not 0..%d: %d is missing", d, len(set)-1, i))
			}
		}
	}
	for d, evs := range logs {
		for _, e := range evs {
			if !byDev[d][e.Comm] {
				s.Problems = append(s.Problems, fmt.Sprintf("device %d: communicator %d emitted events but has no comm line", d, e.Comm))
				break
			}
		}
	}
}

// checkDrainCounts checks, without the events, the work items a hook the
// drain aggregates counted on device d: each work item is two positions,
// START and STOP, and counts unless one of its records was dropped, so
// every aggregate counts matched/2 work items less at most one per record
// dropped, exactly matched/2 when none was. It assumes every work item
// ended (a finalized run): a region whose last START has no STOP adds one
// position to matched and none to the work items.
func checkDrainCounts(h *config.Hook, d int, st schema.DumpStats, out *output, problems []string) []string {
	items := st.Matched / 2
	for _, a := range h.Aggregates {
		var n uint64
		for _, r := range out.aggs[aggKey{h.Name, d, a.Name}] {
			n += r.Count
		}
		if n > items || n+st.Dropped < items {
			problems = append(problems, fmt.Sprintf("aggregate %s counts %d work items; %d matched positions and %d dropped allow %d to %d",
				a.Name, n, st.Matched, st.Dropped, items-min(items, st.Dropped), items))
		}
	}
	return problems
}

// aggOnlyRow is the row of a hook that only aggregates on device d: it
// reserves no position, so its dump_stats count what it matched (its
// aggregates' count), no record and no drop. Exact when every aggregate of
// the hook counted that many events and, where the harness computed its
// aggregates from the event log, as many as the harness matched.
func aggOnlyRow(h *config.Hook, d int, emitted uint64, out *output, matches map[statKey]uint64) Row {
	r := Row{Hook: h.Name, Device: d, Emitted: emitted, Expected: -1}
	k := statKey{h.Name, d}
	st, ok := out.final[k]
	if !ok {
		r.Problems = append(r.Problems, "no final dump_stats line")
		return r
	}
	r.Matched, r.Records, r.Dropped, r.Lines = st.Matched, st.Records, st.Dropped, out.lines[k]
	r.Dumps = len(out.dumps[k])
	r.Problems = checkDumps(out.dumps[k], true, r.Problems)
	r.Stages = fmt.Sprintf("full %d, overwritten %d, torn %d, ring %d", st.DroppedBufferFull, st.DroppedOverwritten, st.DroppedTorn, st.DroppedRingFull)
	if r.Records != 0 || r.Dropped != 0 || r.Lines != 0 || st.Pending != 0 {
		r.Problems = append(r.Problems, fmt.Sprintf("records %d, dropped %d, pending %d, %d record lines from a hook that only aggregates", r.Records, r.Dropped, st.Pending, r.Lines))
	}
	for _, a := range h.Aggregates {
		var n uint64
		for _, row := range out.aggs[aggKey{h.Name, d, a.Name}] {
			n += row.Count
		}
		if n != st.Matched {
			r.Problems = append(r.Problems, fmt.Sprintf("aggregate %s counts %d events, matched_total %d", a.Name, n, st.Matched))
		}
	}
	if n, ok := matches[k]; ok {
		r.Expected = int64(n)
		if n != st.Matched {
			r.Problems = append(r.Problems, fmt.Sprintf("harness expects %d matches, plugin matched %d", n, st.Matched))
		}
	}
	return r
}
