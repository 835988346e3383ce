// Package gputest decides what a test that needs a GPU does where none is
// usable: it skips, except under NCCLHOOKS_REQUIRE_GPU=1 (the runs on the GPU
// machine), where a missing driver, device or library is a failure, so that a
// broken binding cannot pass as "no GPU".
package gputest

import (
	"errors"
	"os"
	"testing"

	"github.com/ncclhooks/ncclhooks/internal/gpuerr"
)

// Required reports whether NCCLHOOKS_REQUIRE_GPU=1 is set.
func Required() bool { return os.Getenv("NCCLHOOKS_REQUIRE_GPU") == "1" }

// Skip skips t with the reason, or fails it when a GPU is required.
func Skip(t testing.TB, format string, args ...any) {
	t.Helper()
	if Required() {
		t.Fatalf("NCCLHOOKS_REQUIRE_GPU=1, but: "+format, args...)
	}
	t.Skipf("GPU test skipped: "+format, args...)
}

// Open takes the error of opening the CUDA libraries for a GPU test
// (cuda.OpenGPU): nil goes on; no driver or no device skips (Skip); any
// other error fails the test, as it is a broken binding or installation on
// a machine that has a GPU, not "no GPU".
func Open(t testing.TB, err error) {
	t.Helper()
	switch {
	case err == nil:
	case errors.Is(err, gpuerr.ErrNoDriver), errors.Is(err, gpuerr.ErrNoDevice):
		Skip(t, "no GPU: %v", err)
	default:
		t.Fatalf("opening the CUDA libraries failed on a machine with a GPU driver: %v", err)
	}
}
