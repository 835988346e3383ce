package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Issue 34.3 and 34.4: run refuses what the harness cannot play with the
// range allowed, before the run (no output is written), rather than
// swapping in a default and printing the user's value.
func TestRunRefusesValuesOutOfRange(t *testing.T) {
	const prof = "../../examples/latency.yaml"
	for _, c := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--devices", "0"}, "devices 0: allowed 1 to 256"},
		{[]string{"--comms", "0"}, "comms 0: allowed 1 to 1024"},
		{[]string{"--items", "-5"}, "items -5: allowed 1 to 100000000"},
		{[]string{"--batch", "0"}, "batch 0: allowed 1 to 64"},
		{[]string{"--batch", "65"}, "batch 65: allowed 1 to 64"},
		{[]string{"--work", "0"}, "work 0: allowed 1 to"},
		{[]string{"--replays", "0"}, "replays 0: allowed 1 to"},
		{[]string{"--channels", "0"}, "channels 0: allowed 1 to 64 (NCCL's MAXCHANNELS is 64)"},
		{[]string{"--channels", "65"}, "channels 65: allowed 1 to 64 (NCCL's MAXCHANNELS is 64)"},
		{[]string{"--channels", "100"}, "channels 100: allowed 1 to 64"},
		{[]string{"--channels", "10000"}, "channels 10000: allowed 1 to 64"},
		{[]string{"--slowdown", "0.5"}, "slowdown 0.5: allowed 1 to 100"},
		// Every count in range, but more threads than the cpu backend starts.
		{[]string{"--devices", "2", "--comms", "64", "--channels", "64"}, "devices 2 x comms 64 x channels 64 = 8192 channels: the cpu backend runs each as a thread, at most 4096"},
		{[]string{"--backend", "foo"}, `--backend "foo": use auto`},
	} {
		dir := t.TempDir()
		args := append([]string{"run", prof, "--out", dir}, c.flags...)
		if !slices.Contains(c.flags, "--backend") {
			args = append(args, "--backend", "cpu")
		}
		stdout, stderr, code := cliSplit(t, nil, args...)
		if code != 2 || !strings.Contains(stderr, "ncclhooks run: "+c.want) || strings.Contains(stdout, "result:") {
			t.Errorf("%v: exit %d, want 2 and %q\nstdout:\n%s\nstderr:\n%s", c.flags, code, c.want, stdout, stderr)
		}
		if strings.Contains(stderr, "goroutine ") || strings.Contains(stderr, "pthread_create") {
			t.Errorf("%v: crashed:\n%s", c.flags, stderr)
		}
		if files, _ := filepath.Glob(filepath.Join(dir, "*")); len(files) > 0 {
			t.Errorf("%v: refused, yet it wrote %v", c.flags, files)
		}
	}
}

// Issue 34.4: at NCCL's most channels, 64, the pairing is exact: the
// harness and the plugin agree on every aggregate of a paired duration
// (past 64, channels c and c+64 would share the plugin's pairing entries).
func TestRunAtMaxChannelsExact(t *testing.T) {
	out, code := cli(t, "run", "../../examples/latency.yaml", "--backend", "cpu", "--out", t.TempDir(),
		"--devices", "1", "--comms", "2", "--channels", "64", "--items", "100")
	if code != 0 || !strings.Contains(out, "result: exact") || strings.Contains(out, "MISMATCH") {
		t.Fatalf("64 channels: exit %d:\n%s", code, out)
	}
}

// Issue 34.8: a missing argument is named, with the usage after it; exit 2.
func TestMissingArgumentsNamed(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run"}, "ncclhooks run: missing PROFILE"},
		{[]string{"run", "a.yaml", "b.yaml"}, "ncclhooks run: 2 argument(s) where 1 go (PROFILE): a.yaml b.yaml"},
		{[]string{"check", dir}, "ncclhooks check: missing --profile PROFILE"},
		{[]string{"check", "--profile", "../../examples/latency.yaml"}, "ncclhooks check: missing OUTPUT_DIR"},
		{[]string{"report"}, "ncclhooks report: missing OUTPUT"},
		{[]string{"trace"}, "ncclhooks trace: missing OUTPUT"},
		{[]string{"diff"}, "ncclhooks diff: missing BASE and NEW"},
		{[]string{"diff", "a"}, "ncclhooks diff: missing NEW"},
		{[]string{"diff", "--base", "a"}, "ncclhooks diff: missing --new"},
		{[]string{"validate"}, "ncclhooks validate: missing PROFILE"},
		{[]string{"gen"}, "ncclhooks gen: missing PROFILE"},
		{[]string{"funcs", "a", "b"}, "ncclhooks funcs: 2 argument(s) where 1 go"},
	} {
		_, stderr, code := cliSplit(t, nil, c.args...)
		if code != 2 || !strings.HasPrefix(stderr, c.want) || !strings.Contains(stderr, "usage:") {
			t.Errorf("%v: exit %d, want 2 and stderr starting %q, then the usage:\n%s", c.args, code, c.want, stderr)
		}
	}
}

// Issue 34.8: one exit status per kind of failure, the same in every
// command (0 ok, 1 a verdict against the input, 2 no verdict or a usage
// error), every message "ncclhooks CMD: ...", and the table in the help.
func TestExitStatusPerKindOfFailure(t *testing.T) {
	dir := t.TempDir()
	bad := writeFile(t, dir, "bad.yaml", "version: 1\nname: bad\nhooks:\n  - name: h\n    when: phase ==\n    fields: [phase]\n")
	missing := filepath.Join(dir, "no-such.yaml")
	out := filepath.Join(dir, "out")
	if o, code := cli(t, "run", "../../examples/all-events.yaml", "--backend", "cpu", "--out", out, "--items", "20"); code != 0 {
		t.Fatalf("run: exit %d:\n%s", code, o)
	}
	for _, c := range []struct {
		args []string
		code int
	}{
		// An invalid profile is a verdict: 1 from every command that reads one.
		{[]string{"validate", bad}, 1},
		{[]string{"gen", bad}, 1},
		{[]string{"run", bad, "--backend", "cpu", "--out", t.TempDir()}, 1},
		{[]string{"check", out, "--profile", bad}, 1},
		// A profile that cannot be read gets no verdict: 2.
		{[]string{"validate", missing}, 2},
		{[]string{"gen", missing}, 2},
		{[]string{"run", missing, "--backend", "cpu"}, 2},
		{[]string{"check", out, "--profile", missing}, 2},
		// Unreadable output: 2.
		{[]string{"report", filepath.Join(dir, "nothing")}, 2},
		{[]string{"trace", filepath.Join(dir, "nothing"), "-o", filepath.Join(dir, "t.json")}, 2},
		{[]string{"check", filepath.Join(dir, "nothing"), "--profile", "../../examples/all-events.yaml"}, 2},
		// A bad flag or value: 2.
		{[]string{"run", "../../examples/all-events.yaml", "--no-such-flag"}, 2},
		{[]string{"run", "../../examples/all-events.yaml", "--devices", "x"}, 2},
		{[]string{"validate", "--arch", "bogus", "../../examples/all-events.yaml"}, 2},
		{[]string{"validate", "--max-registers", "10", "../../examples/all-events.yaml"}, 2},
		{[]string{"validate", "--max-registers", "256", "../../examples/all-events.yaml"}, 2},
		{[]string{"report", "--no-such-flag", out}, 2},
		{[]string{"check", out, "--profile", "../../examples/all-events.yaml", "--no-such-flag"}, 2},
		// A MISMATCH is a verdict: 1.
		{[]string{"check", out, "--profile", "../../examples/all-events.yaml", "--comms", "3"}, 1},
	} {
		_, stderr, code := cliSplit(t, nil, c.args...)
		if code != c.code {
			t.Errorf("%v: exit %d, want %d\n%s", c.args, code, c.code, stderr)
		}
		// The first line says which command speaks (the usage may follow).
		if prefix := "ncclhooks " + c.args[0] + ": "; c.code == 2 && !strings.HasPrefix(stderr, prefix) {
			t.Errorf("%v: stderr does not start with %q:\n%s", c.args, prefix, stderr)
		}
		for _, l := range strings.Split(strings.TrimSpace(stderr), "\n") {
			if strings.Contains(l, "bad.yaml:5:") && !strings.HasPrefix(l, "ncclhooks "+c.args[0]+": ") {
				t.Errorf("%v: a profile error without the command: %q", c.args, l)
			}
		}
	}
	help, _, code := cliSplit(t, nil, "help")
	for _, want := range []string{"0  ok", "1  a verdict against the input", "2  no verdict"} {
		if code != 0 || !strings.Contains(help, want) {
			t.Errorf("help: exit %d, no %q in:\n%s", code, want, help)
		}
	}
}

// Issue 34.8: validate's --arch and --max-registers are checked even where
// no GPU checks the hooks; help help is help; -q silences the note that the
// GPU checks were skipped.
func TestValidateFlagsAndQuiet(t *testing.T) {
	const prof = "../../examples/latency.yaml"
	if _, stderr, code := cliSplit(t, nil, "validate", "--arch", "bogus", prof); code != 2 || !strings.Contains(stderr, `ncclhooks validate: --arch "bogus"`) {
		t.Errorf("--arch bogus: exit %d:\n%s", code, stderr)
	}
	if _, stderr, code := cliSplit(t, nil, "validate", "--max-registers", "10", prof); code != 2 || !strings.Contains(stderr, "--max-registers 10: allowed 24 to 255") {
		t.Errorf("--max-registers 10: exit %d:\n%s", code, stderr)
	}
	for _, ok := range [][]string{{"--arch", "sm_90"}, {"--arch", "sm_100a"}, {"--max-registers", "24"}, {"--max-registers", "255"}} {
		if stdout, stderr, code := cliSplit(t, nil, append([]string{"validate"}, append(ok, prof)...)...); code != 0 || !strings.Contains(stdout, "ok: profile") {
			t.Errorf("%v: exit %d:\n%s%s", ok, code, stdout, stderr)
		}
	}
	stdout, stderr, code := cliSplit(t, nil, "validate", prof)
	if code != 0 {
		t.Fatalf("validate: exit %d:\n%s%s", code, stdout, stderr)
	}
	if strings.Contains(stdout, "note:") {
		t.Errorf("a note among the results on stdout:\n%s", stdout)
	}
	if strings.Contains(stderr, "not checked") {
		// No driver here: the note is said, and -q leaves it out.
		if !strings.HasPrefix(stderr, "ncclhooks validate: note: ") {
			t.Errorf("the note does not name the command:\n%s", stderr)
		}
		if _, qerr, code := cliSplit(t, nil, "-q", "validate", prof); code != 0 || qerr != "" {
			t.Errorf("-q validate: exit %d, stderr:\n%s", code, qerr)
		}
	}
	for _, args := range [][]string{{"help", "help"}, {"help", "--help"}} {
		out, errOut, code := cliSplit(t, nil, args...)
		if code != 0 || !strings.Contains(out, "usage:") || !strings.Contains(out, "ncclhooks help [COMMAND]") {
			t.Errorf("%v: exit %d:\n%s%s", args, code, out, errOut)
		}
	}
	if _, _, code := cliSplit(t, nil, "help", "frobnicate"); code != 2 {
		t.Errorf("help frobnicate: exit %d, want 2", code)
	}
}

// Issue 34.8: run --events-out makes its directory before the run, and
// refuses one it cannot make before running.
func TestRunEventsOutDirectory(t *testing.T) {
	dir := t.TempDir()
	events := filepath.Join(dir, "a", "b")
	out := filepath.Join(dir, "out")
	if o, code := cli(t, "run", "../../examples/all-events.yaml", "--backend", "cpu", "--out", out, "--events-out", events, "--devices", "1", "--comms", "1", "--items", "20"); code != 0 {
		t.Fatalf("--events-out %s: exit %d:\n%s", events, code, o)
	}
	if _, err := os.Stat(filepath.Join(events, "events-dev0-comm0.bin")); err != nil {
		t.Errorf("no event log: %v", err)
	}
	file := writeFile(t, dir, "file", "")
	out2 := filepath.Join(dir, "out2")
	stdout, stderr, code := cliSplit(t, nil, "run", "../../examples/all-events.yaml", "--backend", "cpu", "--out", out2, "--events-out", filepath.Join(file, "x"), "--items", "20")
	if code != 2 || !strings.HasPrefix(stderr, "ncclhooks run: --events-out: ") || strings.Contains(stdout, "result:") {
		t.Errorf("--events-out under a file: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if _, err := os.Stat(out2); err == nil {
		t.Errorf("the run ran before --events-out was refused: %s exists", out2)
	}
}

// Issue 34.5: check refuses an output written with another profile than
// --profile, naming both.
func TestCheckRefusesAnotherProfile(t *testing.T) {
	out := t.TempDir()
	if o, code := cli(t, "run", "../../examples/latency.yaml", "--backend", "cpu", "--out", out, "--items", "20"); code != 0 {
		t.Fatalf("run: exit %d:\n%s", code, o)
	}
	stdout, stderr, code := cliSplit(t, nil, "check", out, "--profile", "../../examples/all-events.yaml")
	if code != 2 || !strings.Contains(stderr, `written with profile "latency"`) || !strings.Contains(stderr, `not "all-events"`) || strings.Contains(stdout, "result:") {
		t.Errorf("check against all-events: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	// The same name, other hooks.
	renamed := writeFile(t, t.TempDir(), "latency.yaml", "version: 1\nname: latency\nhooks:\n  - name: other\n    fields: [timestamp]\n")
	if _, stderr, code := cliSplit(t, nil, "check", out, "--profile", renamed); code != 2 || !strings.Contains(stderr, "hooks [latency]") || !strings.Contains(stderr, "hooks [other]") {
		t.Errorf("check against a profile of the same name and other hooks: exit %d:\n%s", code, stderr)
	}
	if o, code := cli(t, "check", out, "--profile", "../../examples/latency.yaml"); code != 0 || !strings.Contains(o, "result: exact") {
		t.Errorf("check against its own profile: exit %d:\n%s", code, o)
	}
}
