package main

import (
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/ncclhooks/ncclhooks/internal/report"
	"github.com/ncclhooks/ncclhooks/internal/trace"
)

// A job killed with SIGTERM after its hooks ran (no finalize): the output
// has a final dump_stats with exact totals that the project's readers
// accept, and the process still ends as SIGTERM would have ended it
// without the plugin: killed by SIGTERM by default, or by the job's own
// handler, whether that was installed before the plugin or after it.
func TestSIGTERMLeavesAFinalDump(t *testing.T) {
	for _, c := range []struct {
		name, handler, knob string
		wantDump            bool
		wantStatus          string
	}{
		{"default action", "", "", true, "signal terminated"},
		{"job handler before the plugin", "before", "", true, "exit 42"},
		{"job handler after the plugin", "after", "", false, "exit 42"},
		{"knob off", "", "off", false, "signal terminated"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "out")
			prof := writeProfile(t, dir, "version: 1\nname: sigterm\noutput: {dump_interval: 1h}\nhooks:\n  - name: all\n    fields: [timestamp, workCounter, funcId, channelId, phase]\n    buffer: {slots: 65536}\n")
			env := []string{"NCCL_HOOKS_PROFILE=" + prof, "NCCL_HOOKS_BACKEND=cpu", "NCCL_HOOKS_DUMP_DIR=" + out, "CDRIVER_SIGTERM=1"}
			if c.handler != "" {
				env = append(env, "CDRIVER_JOB_HANDLER="+c.handler)
			}
			if c.knob != "" {
				env = append(env, "NCCL_HOOKS_SIGTERM_DUMP="+c.knob)
			}
			r, err := startDriver(t, env, 2, 1, 2, 3000, 1)
			if got := status(err); got != c.wantStatus {
				t.Fatalf("the job ended with %s, want %s:\n%s", got, c.wantStatus, r.out)
			}
			if ran := strings.Contains(r.out, "JOBHANDLER"); ran != (c.handler != "") {
				t.Errorf("job handler ran: %v, installed: %q", ran, c.handler)
			}
			if len(r.warns) != 0 {
				t.Errorf("WARNs: %q", r.warns)
			}
			read := readOutput
			if !c.wantDump {
				read = readKilledOutput // killed mid-write: the last line may be cut
			}
			o := read(t, out)
			for d := 0; d < 2; d++ {
				k := fmt.Sprint("all ", d)
				st, ok := o.final[k]
				if ok != c.wantDump {
					t.Fatalf("%s: final dump %v, want %v:\n%s", k, ok, c.wantDump, r.out)
				}
				if !ok {
					continue
				}
				if st.Matched != r.emitted[d] || st.Records+st.Dropped != st.Matched || st.Pending != 0 || uint64(o.records[k]) != st.Records {
					t.Errorf("%s: final %+v, %d record lines, emitted %d", k, st, o.records[k], r.emitted[d])
				}
			}
			if !c.wantDump {
				return
			}
			rep, err := report.Load([]string{out}, report.Options{})
			if err != nil {
				t.Fatalf("report refuses the output: %v", err)
			}
			if len(rep.Hooks) != 1 || rep.Hooks[0].Records != o.final["all 0"].Records+o.final["all 1"].Records {
				t.Errorf("report: %+v", rep.Hooks)
			}
			sum, err := trace.Write(io.Discard, []string{out}, report.Options{})
			if err != nil || sum.Slices == 0 {
				t.Errorf("trace: %+v, %v", sum, err)
			}
		})
	}
}

// status is how a process ended: "exit N" or "signal NAME".
func status(err error) string {
	var ee *exec.ExitError
	if err == nil {
		return "exit 0"
	}
	if !errors.As(err, &ee) {
		return err.Error()
	}
	ws := ee.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		return "signal " + ws.Signal().String()
	}
	return fmt.Sprint("exit ", ws.ExitStatus())
}
