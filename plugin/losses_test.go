package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ncclhooks/ncclhooks/internal/schema"
)

// What a real job's user sees of the plugin's losses without reading NCCL's
// log (issue 34, item 9): a refused profile leaves an inactive line in the
// dump directory, lost events are one WARN at the last finalize, and the
// header names the profile's contents and the versions.

// lostRE matches the last finalize's WARN and captures N.
var lostRE = regexp.MustCompile(`^ncclhooks: lost (\d+) events of \d+ matched`)

// splitLost separates the "lost N events" WARNs from the others.
func splitLost(warns []string) (other, lost []string) {
	for _, w := range warns {
		if lostRE.MatchString(w) {
			lost = append(lost, w)
		} else {
			other = append(other, w)
		}
	}
	return other, lost
}

// fileLines decodes every line of the one output file in dir.
func fileLines(t *testing.T, dir string) []map[string]any {
	t.Helper()
	f, err := schema.Open(outputFile(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("%q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

// A profile the plugin refuses writes a header and an inactive line with
// the reason to the dump directory, whether it fails to load, to generate
// or to compile (the compiler fails: the line joins the open output);
// an unset profile or a bad knob refuses no profile and writes nothing.
func TestRefusedProfileLeavesAnInactiveLine(t *testing.T) {
	dir := t.TempDir()
	broken := writeProfile(t, dir, "version: 1\nname: broken\nhooks:\n  - name: x\n    fields: [bogus]\n")
	good := filepath.Join(dir, "good.yaml")
	if err := os.WriteFile(good, []byte(exactProfile), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		env  []string
		want string // in the reason; "" wants no output at all
	}{
		{"broken", []string{"NCCL_HOOKS_PROFILE=" + broken, "NCCL_HOOKS_BACKEND=cpu"}, "bogus"},
		{"missing", []string{"NCCL_HOOKS_PROFILE=" + filepath.Join(dir, "nope.yaml"), "NCCL_HOOKS_BACKEND=cpu"}, "nope.yaml"},
		{"compiler fails", []string{"NCCL_HOOKS_PROFILE=" + good, "NCCL_HOOKS_BACKEND=cpu", "NCCL_HOOKS_CC=/bin/false", "NCCL_HOOKS_CACHE_DIR=off"}, "/bin/false failed"},
		{"unset", []string{"NCCL_HOOKS_BACKEND=cpu"}, ""},
		{"bad knob", []string{"NCCL_HOOKS_PROFILE=" + broken, "NCCL_HOOKS_BACKEND=tpu"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(dir, "out-"+strings.ReplaceAll(c.name, " ", "-"))
			r := runDriver(t, append(c.env, "NCCL_HOOKS_DUMP_DIR="+out), 1, 1, 1, 10, 1)
			if len(r.warns) != 1 || !strings.Contains(r.warns[0], "inactive") {
				t.Fatalf("want one WARN that the plugin is inactive, got %q", r.warns)
			}
			if c.want == "" {
				if _, err := os.Stat(out); !os.IsNotExist(err) {
					t.Errorf("no profile refused, yet %s exists (%v)", out, err)
				}
				return
			}
			lines := fileLines(t, out)
			var inactive []map[string]any
			for _, l := range lines {
				if l["type"] == schema.TypeInactive {
					inactive = append(inactive, l)
				}
			}
			if lines[0]["type"] != schema.TypeHeader || len(inactive) != 1 {
				t.Fatalf("want a header and one inactive line, got %v", lines)
			}
			reason, _ := inactive[0]["reason"].(string)
			first, _, _ := strings.Cut(reason, "\n") // the driver logs a WARN's first line
			if !strings.Contains(reason, c.want) || !strings.Contains(r.warns[0], first) {
				t.Errorf("inactive reason %q: want %q in it, and the WARN's text (%q)", reason, c.want, r.warns[0])
			}
			if ts, _ := inactive[0]["time_unix_ns"].(float64); ts <= 0 {
				t.Errorf("inactive line without its time: %v", inactive[0])
			}
		})
	}
}

// Events lost to a full buffer are one WARN at the last finalize with their
// number, which is what the final dumps count as dropped; a run that
// loses nothing has no such WARN.
func TestLostEventsWarnedAtLastFinalize(t *testing.T) {
	dir := t.TempDir()
	prof := writeProfile(t, dir, "version: 1\nname: lossy\noutput: {dump_interval: 1h}\nhooks:\n  - name: all\n    fields: [timestamp, workCounter, channelId, phase]\n    buffer: {slots: 16, overflow: drop_newest}\n")
	out := filepath.Join(dir, "out")
	r := runDriver(t, []string{"NCCL_HOOKS_PROFILE=" + prof, "NCCL_HOOKS_BACKEND=cpu", "NCCL_HOOKS_DUMP_DIR=" + out}, 2, 1, 2, 2000, 1)
	other, lost := splitLost(r.warns)
	if len(lost) != 1 || len(other) != 1 {
		t.Fatalf("want the first drop's WARN and one lost WARN at the last finalize, got %q", r.warns)
	}
	o := readOutput(t, out)
	var dropped uint64
	for d := range 2 {
		dropped += o.final[fmt.Sprint("all ", d)].Dropped
	}
	if want := fmt.Sprintf("ncclhooks: lost %d events of ", dropped); dropped == 0 || !strings.HasPrefix(lost[0], want) {
		t.Errorf("lost WARN %q, want it to start %q (the final dumps' dropped_total)", lost[0], want)
	}
	if !strings.Contains(lost[0], o.path) {
		t.Errorf("lost WARN %q does not name the output %s", lost[0], o.path)
	}

	clean := runDriver(t, []string{"NCCL_HOOKS_PROFILE=" + writeProfile(t, t.TempDir(), exactProfile), "NCCL_HOOKS_BACKEND=cpu",
		"NCCL_HOOKS_DUMP_DIR=" + filepath.Join(dir, "clean")}, 1, 1, 1, 100, 1)
	if len(clean.warns) != 0 {
		t.Errorf("nothing lost, yet WARNs %q", clean.warns)
	}
}

// The header names the profile by the SHA-256 of its bytes, the plugin's
// build, and the NCCL that loaded it: unknown to the cdriver, which has no
// ncclGetVersion (the host driver's is checked in TestHostSource*).
func TestHeaderNamesProfileHashAndVersions(t *testing.T) {
	dir := t.TempDir()
	prof := writeProfile(t, dir, exactProfile)
	out := filepath.Join(dir, "out")
	runDriver(t, []string{"NCCL_HOOKS_PROFILE=" + prof, "NCCL_HOOKS_BACKEND=cpu", "NCCL_HOOKS_DUMP_DIR=" + out}, 1, 1, 1, 10, 1)
	h := fileLines(t, out)[0]
	sum := sha256.Sum256([]byte(exactProfile))
	if h["profile_hash"] != hex.EncodeToString(sum[:]) {
		t.Errorf("profile_hash %v, want the profile's SHA-256 %x", h["profile_hash"], sum)
	}
	if v, _ := h["plugin_version"].(string); v == "" {
		t.Errorf("header has no plugin_version: %v", h)
	}
	if h["nccl_version"] != "unknown" {
		t.Errorf("nccl_version %v, want unknown (the cdriver has no ncclGetVersion)", h["nccl_version"])
	}
}
