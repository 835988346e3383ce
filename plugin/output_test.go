package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ncclhooks/ncclhooks/internal/schema"
)

// NCCL_HOOKS_MAX_OUTPUT_BYTES through the real plugin, plain and
// compressed: once the file holds the cap, record lines are counted as
// dropped_cap and not written, the dumps go on, and the totals stay exact.
func TestOutputSizeCap(t *testing.T) {
	for _, c := range []string{"zstd", "gzip"} {
		t.Run(c, func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "out")
			// 2 channels x 30000 items x START and STOP = 120000 events:
			// the buffer (131072 slots) and the ring (262144) hold them all,
			// so a drain a loaded host leaves behind cannot drop one
			// buffer_full or ring_full, and every drop is the cap's.
			prof := writeProfile(t, dir, "version: 1\nname: cap\noutput: {dump_interval: 10ms, ring_capacity: 262144}\nhooks:\n  - name: all\n    fields: [timestamp, workCounter, channelId, phase]\n    buffer: {slots: 131072}\n")
			const capBytes = 64 << 10
			r := runDriver(t, []string{"NCCL_HOOKS_PROFILE=" + prof, "NCCL_HOOKS_BACKEND=cpu", "NCCL_HOOKS_DUMP_DIR=" + out,
				"NCCL_HOOKS_COMPRESS=" + c, "NCCL_HOOKS_MAX_OUTPUT_BYTES=64K", "CDRIVER_WORK=4000"}, 1, 1, 2, 30000, 1)
			capWarns := countWarns(r.warns, "NCCL_HOOKS_MAX_OUTPUT_BYTES")
			if capWarns != 1 {
				t.Errorf("want one WARN about the cap, got %q", r.warns)
			}
			o := readOutput(t, out)
			st := o.final["all 0"]
			if st.Matched != r.emitted[0] || st.Records+st.Dropped != st.Matched || st.Pending != 0 {
				t.Fatalf("final %+v, emitted %d", st, r.emitted[0])
			}
			// Torn, with its WARN, is the one drop a loaded host can add
			// (a driver thread stopped past the torn timeout mid-write).
			if torn := countWarns(r.warns, "torn: a writer reserved a slot"); st.DroppedCap == 0 || st.DroppedCap+st.DroppedTorn != st.Dropped || (st.DroppedTorn > 0) != (torn == 1) {
				t.Errorf("want every drop to be the cap's (or torn, with its WARN), and some: %+v", st)
			}
			if uint64(o.records["all 0"]) != st.Records || st.Records == 0 {
				t.Errorf("%d record lines in the file, records_total %d", o.records["all 0"], st.Records)
			}
			if o.sumDelta["all 0"] != st.Dropped {
				t.Errorf("dropped_since_last_dump sums to %d, dropped_total %d", o.sumDelta["all 0"], st.Dropped)
			}
			// Dumps go on after the cap: several dump_stats lines count cap drops.
			after := 0
			for _, d := range o.dumps["all 0"] {
				if d.records == 0 && d.matchedDelta > 0 {
					after++
				}
			}
			if after < 2 {
				t.Errorf("want dumps of the capture after the cap, got %d: %+v", after, o.dumps["all 0"])
			}
			// The record lines stop at the cap: plain, the bytes up to the
			// last record line; compressed, the file less what one write
			// (up to 1 MiB of lines) and the later dumps add.
			data := fileBytes(t, o.path)
			if c == "none" {
				if end := bytes.LastIndex(data, []byte(`"type":"record"`)); end < 0 || bytes.IndexByte(data[end:], '\n')+end+1 > capBytes {
					t.Errorf("record lines reach past the cap of %d bytes", capBytes)
				}
			} else if st, _ := os.Stat(o.path); st.Size() > capBytes+(1<<20) {
				t.Errorf("compressed file of %d bytes for a cap of %d", st.Size(), capBytes)
			}
		})
	}
}

// A compressed output whose job was killed while writing ends inside a
// frame: it reads up to its last complete line, every line whole, and says
// it was cut short.
func TestTruncatedCompressedOutputReads(t *testing.T) {
	for _, c := range []string{"zstd", "gzip"} {
		t.Run(c, func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "out")
			prof := writeProfile(t, dir, "version: 1\nname: trunc\noutput: {dump_interval: 10ms}\nhooks:\n  - name: all\n    fields: [timestamp, workCounter, channelId, phase]\n    buffer: {slots: 65536}\n")
			r := runDriver(t, []string{"NCCL_HOOKS_PROFILE=" + prof, "NCCL_HOOKS_BACKEND=cpu", "NCCL_HOOKS_DUMP_DIR=" + out,
				"NCCL_HOOKS_COMPRESS=" + c, "CDRIVER_WORK=2000"}, 1, 1, 2, 20000, 1)
			o := readOutput(t, out)
			if st := o.final["all 0"]; st.Matched != r.emitted[0] || st.Records+st.Dropped != st.Matched || st.Records < 1000 {
				t.Fatalf("final %+v, emitted %d", st, r.emitted[0])
			}
			full := readLines(t, o.path)
			data := fileBytes(t, o.path)
			if bytes.HasPrefix(data, []byte(`{"type"`)) {
				t.Fatalf("%s is not compressed", o.path)
			}
			truncated := 0
			const cuts = 20
			for i := 1; i <= cuts; i++ {
				cut := len(data) * i / (cuts + 1)
				p := filepath.Join(dir, fmt.Sprintf("cut%d", i))
				if err := os.WriteFile(p, data[:cut], 0o644); err != nil {
					t.Fatal(err)
				}
				rd, err := schema.Open(p)
				if err != nil {
					t.Fatal(err)
				}
				b, err := io.ReadAll(rd)
				rd.Close()
				if err != nil {
					t.Fatalf("cut at %d of %d: %v", cut, len(data), err)
				}
				lines := strings.SplitAfter(string(b), "\n")
				if lines[len(lines)-1] != "" {
					t.Fatalf("cut at %d: the read ends in part of a line: %q", cut, lines[len(lines)-1])
				}
				lines = lines[:len(lines)-1]
				if len(lines) == 0 || len(lines) >= len(full) {
					t.Fatalf("cut at %d of %d bytes: %d of %d lines", cut, len(data), len(lines), len(full))
				}
				for k, l := range lines {
					if l != full[k] {
						t.Fatalf("cut at %d: line %d differs from the whole file's", cut, k+1)
					}
					if !json.Valid([]byte(l)) {
						t.Fatalf("cut at %d: line %d is not JSON", cut, k+1)
					}
				}
				if rd.Truncated() {
					truncated++
				}
			}
			// A cut that falls between two frames is a clean end.
			if truncated < cuts-2 {
				t.Errorf("%d of %d cuts reported truncated", truncated, cuts)
			}
		})
	}
}

func fileBytes(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	rd, err := schema.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	var lines []string
	sc := bufio.NewScanner(rd)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		lines = append(lines, sc.Text()+"\n")
	}
	if err := sc.Err(); err != nil || rd.Truncated() {
		t.Fatalf("%s: %v (truncated %v)", path, err, rd.Truncated())
	}
	return lines
}

// The header lists the function names NCCL's ncclProfilerDevFuncName gave
// (the C driver's three); a name predicate that matches none of them logs
// one WARN at init naming its position and the closest names, and the
// other hooks record as usual.
func TestFuncNamesInHeaderAndUnmatchedPredicate(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	prof := writeProfile(t, dir, `version: 1
name: names
hooks:
  - name: typo
    when: func startsWith "AllGather_RING_SIMPEL"
    fields: [workCounter, channelId, phase]
  - name: all
    fields: [workCounter, channelId, phase]
    buffer: {slots: 65536}
`)
	r := runDriver(t, []string{"NCCL_HOOKS_PROFILE=" + prof, "NCCL_HOOKS_BACKEND=cpu", "NCCL_HOOKS_DUMP_DIR=" + out}, 1, 1, 2, 200, 1)
	if len(r.warns) != 1 || !strings.Contains(r.warns[0], "profile.yaml:5:11") || !strings.Contains(r.warns[0], "closest: AllGather_RING_SIMPLE") {
		t.Fatalf("want one WARN naming the predicate's position and the closest name, got %q", r.warns)
	}
	o := readOutput(t, out)
	if st := o.final["all 0"]; st.Records != r.emitted[0] {
		t.Errorf("the other hook: %+v, emitted %d", st, r.emitted[0])
	}
	lines := readLines(t, o.path)
	var h schema.Header
	if err := json.Unmarshal([]byte(lines[0]), &h); err != nil {
		t.Fatal(err)
	}
	want := []string{"AllReduce_Sum_f32_RING_LL", "AllGather_RING_SIMPLE", "ReduceScatter_Sum_bf16_RING_LL128"}
	if strings.Join(h.Funcs, ",") != strings.Join(want, ",") {
		t.Errorf("header funcs %q, want %q", h.Funcs, want)
	}
}
