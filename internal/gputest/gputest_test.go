package gputest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestSkipOrFail runs a test that calls Skip in a child process, with and
// without NCCLHOOKS_REQUIRE_GPU=1.
func TestSkipOrFail(t *testing.T) {
	if os.Getenv("GPUTEST_CHILD") == "1" {
		Skip(t, "no device here")
		return
	}
	for _, tc := range []struct {
		require string
		fail    bool
		says    string
	}{
		{"", false, "GPU test skipped: no device here"},
		{"1", true, "NCCLHOOKS_REQUIRE_GPU=1, but: no device here"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSkipOrFail$", "-test.v")
		cmd.Env = append(os.Environ(), "GPUTEST_CHILD=1", "NCCLHOOKS_REQUIRE_GPU="+tc.require)
		out, err := cmd.CombinedOutput()
		if (err != nil) != tc.fail || !strings.Contains(string(out), tc.says) {
			t.Errorf("NCCLHOOKS_REQUIRE_GPU=%q: err %v, output:\n%s", tc.require, err, out)
		}
	}
}
