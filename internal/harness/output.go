package harness

// output.go reads the plugin's JSON lines output back: final statistics, records and comm lines.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"

	"github.com/ncclhooks/ncclhooks/internal/config"
	"github.com/ncclhooks/ncclhooks/internal/schema"
)

type statKey struct {
	hook   string
	device int
}

type output struct {
	// epoch is the profile epoch these lines are (a live reload): 0 the
	// header's profile, k the k-th profile line's; profile that line (nil
	// for epoch 0). comms holds the comm lines of every epoch (they belong
	// to none).
	epoch   int
	profile *schema.Profile
	// fields and drained are the epoch's hooks' (the header's, or its
	// profile line's): a hook without fields only aggregates.
	fields  map[string]map[string]string
	drained []string
	aggs    map[aggKey]map[rowKey]*aggRow // final snapshots
	final   map[statKey]schema.DumpStats
	dumps   map[statKey][]schema.DumpStats           // every dump_stats line, in file order
	lines   map[statKey]uint64                       // record lines
	records map[statKey][]map[string]json.RawMessage // the record lines, when kept
	comms   []schema.Comm
	refused map[string]string // hook -> reason
}

// outputFile finds this process's JSON lines file in dir.
func outputFile(dir string) (string, error) { return OutputFile(dir, os.Getpid()) }

// lineHead is what every line is sorted by.
type lineHead struct {
	Type   string `json:"type"`
	Hook   string `json:"hook"`
	Device int    `json:"device"`
}

// readOutput reads a plugin output file. keepRecords keeps every record
// line, for checks record by record; without it only their number per hook
// and device is kept, so that a run of millions of records (run --no-verify,
// for rates) costs memory by hooks and devices, not by records (issue 13:
// 6.25 GB at 4 M records).
func readOutput(file string, keepRecords bool) (*output, error) {
	outs, err := readEpochs(file, keepRecords)
	if err != nil {
		return nil, err
	}
	return outs[0], nil
}

func newOutput(epoch int, p *schema.Profile) *output {
	return &output{epoch: epoch, profile: p, final: map[statKey]schema.DumpStats{}, dumps: map[statKey][]schema.DumpStats{}, lines: map[statKey]uint64{}, records: map[statKey][]map[string]json.RawMessage{},
		aggs: map[aggKey]map[rowKey]*aggRow{}, refused: map[string]string{}}
}

// readEpochs reads a plugin output file, one output per profile epoch
// (schema.Profile): a file without a live reload has one. The comm lines of
// every epoch are in each.
func readEpochs(file string, keepRecords bool) ([]*output, error) {
	f, err := schema.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := newOutput(0, nil)
	outs := []*output{out}
	var comms []schema.Comm
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for line := 1; sc.Scan(); line++ {
		var head lineHead
		if err := json.Unmarshal(sc.Bytes(), &head); err != nil {
			return nil, fmt.Errorf("%s:%d: %v", file, line, err)
		}
		typ, hook, k := head.Type, head.Hook, statKey{head.Hook, head.Device}
		switch typ {
		case schema.TypeRecord:
			out.lines[k]++
			if !keepRecords {
				continue
			}
			var m map[string]json.RawMessage
			dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
			dec.UseNumber()
			if err := dec.Decode(&m); err != nil {
				return nil, fmt.Errorf("%s:%d: %v", file, line, err)
			}
			out.records[k] = append(out.records[k], m)
		case schema.TypeAggregate:
			var fin schema.Aggregate
			json.Unmarshal(sc.Bytes(), &fin)
			if !fin.Final {
				continue
			}
			k, rows, err := parseAggLine(sc.Bytes())
			if err != nil {
				return nil, fmt.Errorf("%s:%d: %v", file, line, err)
			}
			out.aggs[k] = rows
		case schema.TypeComm:
			var c schema.Comm
			if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
				return nil, fmt.Errorf("%s:%d: %v", file, line, err)
			}
			comms = append(comms, c)
		case schema.TypeProfile:
			var p schema.Profile
			if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
				return nil, fmt.Errorf("%s:%d: %v", file, line, err)
			}
			if p.Epoch != len(outs) {
				return nil, fmt.Errorf("%s:%d: profile line of epoch %d after epoch %d", file, line, p.Epoch, len(outs)-1)
			}
			out = newOutput(p.Epoch, &p)
			out.fields, out.drained = p.Fields, p.Drained
			outs = append(outs, out)
		case schema.TypeHeader:
			var h schema.Header
			if json.Unmarshal(sc.Bytes(), &h) == nil {
				out.fields, out.drained = h.Fields, h.Drained
			}
		case schema.TypeRefused:
			var r schema.Refused
			json.Unmarshal(sc.Bytes(), &r)
			out.refused[hook] = r.Position + ": " + r.Reason
		case schema.TypeDumpStats:
			var st schema.DumpStats
			if err := json.Unmarshal(sc.Bytes(), &st); err != nil {
				return nil, fmt.Errorf("%s:%d: %v", file, line, err)
			}
			out.dumps[k] = append(out.dumps[k], st)
			if st.Final {
				out.final[k] = st // the last final dump wins (several init/finalize cycles)
			}
		}
	}
	for _, o := range outs {
		o.comms = comms
	}
	return outs, sc.Err()
}

// CommIndex maps each communicator name of a plugin output's comm lines to
// its index (the comm intrinsic), for callers that number their
// communicators otherwise.
func CommIndex(file string) (map[string]int, error) {
	out, err := readOutput(file, false)
	if err != nil {
		return nil, err
	}
	m := map[string]int{}
	for _, c := range out.comms {
		m[c.Name] = c.Comm
	}
	return m, nil
}

// ReadHeader reads the header line of a plugin output file.
func ReadHeader(file string) (schema.Header, error) {
	var h schema.Header
	f, err := schema.Open(file)
	if err != nil {
		return h, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	if !sc.Scan() {
		if err := sc.Err(); err != nil {
			return h, fmt.Errorf("%s: %w", file, err)
		}
		return h, fmt.Errorf("%s: empty: no header line", file)
	}
	if err := json.Unmarshal(sc.Bytes(), &h); err != nil || h.Type != schema.TypeHeader {
		return h, fmt.Errorf("%s:1: not a header line", file)
	}
	return h, nil
}

// SameProfile says why the output whose header is h was not written with
// prof, or nil: its profile's name, and its hooks where the header lists
// them (a header's fields name every hook of the profile it ran).
func SameProfile(prof *config.Profile, h schema.Header) error {
	if h.Profile != prof.Name {
		return fmt.Errorf("written with profile %q (%s), not %q (%s)", h.Profile, h.ProfileFile, prof.Name, prof.File)
	}
	if h.Fields == nil {
		return nil
	}
	var want, got []string
	for _, hk := range prof.EnabledHooks() {
		want = append(want, hk.Name)
	}
	for name := range h.Fields {
		got = append(got, name)
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(want, got) {
		return fmt.Errorf("written with a profile %q of hooks %v (%s), not %q's hooks %v (%s)", h.Profile, got, h.ProfileFile, prof.Name, want, prof.File)
	}
	return nil
}
