package harness

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/ncclhooks/ncclhooks/config"
)

// PairCheck is what CheckPairs found for one hook on one device.
type PairCheck struct {
	Hook     string
	Device   int
	Items    int // distinct (communicator, channel, workCounter) recorded
	Paired   int // of them, with exactly one START and one STOP
	Funcs    map[string]int
	Problems []string
}

// CheckPairs checks, for every hook that records comm, channelId,
// workCounter and phase, that each work item of each communicator has
// exactly one START and one STOP record (strictly when the hook dropped
// nothing; otherwise that none has two of either), and that every recorded
// function id was named by the NCCL that ran (no "func#N" fallbacks). It is
// the check of real NCCL runs, where no event log says what was emitted.
func CheckPairs(prof *config.Profile, file string) ([]PairCheck, error) {
	out, err := readOutput(file)
	if err != nil {
		return nil, err
	}
	type item struct {
		comm, ch int
		wc       uint64
	}
	var res []PairCheck
	for _, h := range prof.EnabledHooks() {
		names := map[string]string{}
		for _, f := range h.Fields {
			names[f.Source] = f.Name
		}
		if names["comm"] == "" || names["channelId"] == "" || names["workCounter"] == "" || names["phase"] == "" {
			continue
		}
		devs := map[int]bool{}
		for k := range out.final {
			if k.hook == h.Name {
				devs[k.device] = true
			}
		}
		for d := range devs {
			pc := PairCheck{Hook: h.Name, Device: d, Funcs: map[string]int{}}
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
			strict := st.Dropped == 0
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
	return res, nil
}

// OutputFiles lists the plugin's JSON lines files in dir, one per process.
func OutputFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "ncclhooks-") && strings.HasSuffix(e.Name(), ".jsonl") {
			files = append(files, dir+"/"+e.Name())
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no ncclhooks-*.jsonl output in %s", dir)
	}
	return files, nil
}
