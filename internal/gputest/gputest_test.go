package gputest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/ncclhooks/ncclhooks/internal/gpuerr"
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

// TestOpen: no driver or no device skips (fails under NCCLHOOKS_REQUIRE_GPU=1),
// any other failure to open the CUDA libraries fails even without it.
func TestOpen(t *testing.T) {
	if c := os.Getenv("GPUTEST_OPEN"); c != "" {
		Open(t, map[string]error{
			"nil":      nil,
			"nodriver": fmt.Errorf("cuda: %w: libcuda.so.1 not found", gpuerr.ErrNoDriver),
			"nodevice": fmt.Errorf("wrapped: %w", gpuerr.ErrNoDevice),
			"broken":   errors.New("cuda: the CUDA driver lacks cuLibraryLoadData"),
		}[c])
		return
	}
	for _, tc := range []struct {
		err, require string
		fail         bool
		says         string
	}{
		{"nil", "1", false, "PASS"},
		{"nodriver", "", false, "GPU test skipped: no GPU: cuda: no NVIDIA driver"},
		{"nodevice", "", false, "GPU test skipped"},
		{"nodevice", "1", true, "NCCLHOOKS_REQUIRE_GPU=1, but: no GPU"},
		{"broken", "", true, "opening the CUDA libraries failed on a machine with a GPU driver"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestOpen$", "-test.v")
		cmd.Env = append(os.Environ(), "GPUTEST_OPEN="+tc.err, "NCCLHOOKS_REQUIRE_GPU="+tc.require)
		out, err := cmd.CombinedOutput()
		if (err != nil) != tc.fail || !strings.Contains(string(out), tc.says) {
			t.Errorf("%s, NCCLHOOKS_REQUIRE_GPU=%q: err %v, output:\n%s", tc.err, tc.require, err, out)
		}
	}
}
