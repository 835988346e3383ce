package harness

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/ncclhooks/ncclhooks/internal/config"
	"github.com/ncclhooks/ncclhooks/internal/schema"
)

// PairCheck is, for one hook on one device, what the records say about the
// work items they come from.
type PairCheck struct {
	Hook     string
	Device   int
	Items    int // distinct (communicator, channel, workCounter) recorded
	Paired   int // of them, with exactly one START and one STOP
	Funcs    map[string]int
	Problems []string
	// Skipped says why the work items could not be told apart and so were
	// not checked: more communicators on the device than the hook's comm
	// field holds (a u8 comm of a soak's thousands). "": checked.
	Skipped string
}

// checkPairs checks, for every hook that records comm, channelId,
// workCounter and phase, that no work item of a communicator has two START
// or two STOP records, and, where the hook dropped nothing and has no when
// (sampling keeps or drops both phases of an item), that each has exactly one
// of each; and that every recorded function id was named by the NCCL that ran
// (no "func#N" fallbacks). It is what can be checked of real NCCL runs, where
// no event log says what was emitted.
func checkPairs(prof *config.Profile, out *output) []PairCheck {
	type item struct {
		comm, ch int
		wc       uint64
	}
	var res []PairCheck
	for _, h := range prof.EnabledHooks() {
		names := map[string]string{}
		var commType config.Type
		for _, f := range h.Fields {
			names[f.Source] = f.Name
			if f.Source == "comm" {
				commType = f.Type
			}
		}
		if names["comm"] == "" || names["channelId"] == "" || names["workCounter"] == "" || names["phase"] == "" {
			continue
		}
		var devs []int
		for k := range out.final {
			if k.hook == h.Name {
				devs = append(devs, k.device)
			}
		}
		sort.Ints(devs)
		for _, d := range devs {
			pc := PairCheck{Hook: h.Name, Device: d, Funcs: map[string]int{}}
			if n, room := commsOn(out, d), commRoom(commType); n > room {
				pc.Skipped = fmt.Sprintf("its comm field (%s) holds %d values, the device had %d communicators: their work items cannot be told apart", commType, room, n)
				res = append(res, pc)
				continue
			}
			counts := map[item][2]int{}
			bad := 0
			for _, rec := range out.records[statKey{h.Name, d}] {
				var comm, ch, ph int
				var wc uint64
				ok := json.Unmarshal(rec[names["comm"]], &comm) == nil && json.Unmarshal(rec[names["channelId"]], &ch) == nil &&
					json.Unmarshal(rec[names["workCounter"]], &wc) == nil && json.Unmarshal(rec[names["phase"]], &ph) == nil
				if !ok || ph < 0 || ph > 1 {
					if bad++; bad <= 3 {
						pc.Problems = append(pc.Problems, fmt.Sprintf("record seq %s lacks comm/channel/workCounter/phase", rec["seq"]))
					}
					continue
				}
				k := item{comm, ch, wc}
				c := counts[k]
				c[ph]++
				counts[k] = c
				if raw, ok := rec["func"]; ok {
					var fn string
					json.Unmarshal(raw, &fn)
					pc.Funcs[fn]++
					if strings.HasPrefix(fn, "func#") {
						if bad++; bad <= 3 {
							pc.Problems = append(pc.Problems, fmt.Sprintf("record seq %s: function id not named by NCCL (%s)", rec["seq"], fn))
						}
					}
				}
			}
			st := out.final[statKey{h.Name, d}]
			strict := st.Dropped == 0 && h.When == nil
			for k, c := range counts {
				pc.Items++
				if c[0] == 1 && c[1] == 1 {
					pc.Paired++
					continue
				}
				if strict || c[0] > 1 || c[1] > 1 {
					if bad++; bad <= 3 {
						pc.Problems = append(pc.Problems, fmt.Sprintf("comm %d channel %d workCounter %d: %d START and %d STOP records", k.comm, k.ch, k.wc, c[0], c[1]))
					}
				}
			}
			if bad > 3 {
				pc.Problems = append(pc.Problems, fmt.Sprintf("... %d problems in all", bad))
			}
			res = append(res, pc)
		}
	}
	return res
}

// commsOn is how many communicators device d had: its comm lines' highest
// index, plus one.
func commsOn(out *output, d int) int {
	n := 0
	for _, c := range out.comms {
		if c.Device == d {
			n = max(n, c.Comm+1)
		}
	}
	return n
}

// commRoom is how many comm indices a field of type t stores apart (a
// stored index is truncated to t); the zero type is the catalogue's u32.
func commRoom(t config.Type) int {
	bits := 8 * t.Bytes()
	if t.IsSigned() {
		bits--
	}
	if t == "" || bits >= 31 {
		return math.MaxInt32
	}
	return 1 << bits
}

// OutputFiles lists the plugin's JSON lines files in dir, one per process.
func OutputFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "ncclhooks-") && schema.IsOutputName(e.Name()) {
			files = append(files, filepath.Join(dir, e.Name()))
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no ncclhooks-*.jsonl output in %s", dir)
	}
	return files, nil
}

// PrintPairs writes one line per pair check and its problems.
func (s *Summary) PrintPairs(w io.Writer) {
	for _, p := range s.Pairs {
		if p.Skipped != "" {
			fmt.Fprintf(w, "pairs %s device %d: not checked: %s\n", p.Hook, p.Device, p.Skipped)
			continue
		}
		var fns []string
		for fn, n := range p.Funcs {
			fns = append(fns, fmt.Sprintf("%s x%d", fn, n))
		}
		sort.Strings(fns)
		fmt.Fprintf(w, "pairs %s device %d: %d work items, %d with one START and one STOP; functions: %s\n",
			p.Hook, p.Device, p.Items, p.Paired, strings.Join(fns, ", "))
		for _, pr := range p.Problems {
			fmt.Fprintf(w, "MISMATCH %s device %d: %s\n", p.Hook, p.Device, pr)
		}
	}
}
