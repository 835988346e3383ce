// Package gputest decides what a test that needs a GPU does where none is
// usable: it skips, except under NCCLHOOKS_REQUIRE_GPU=1 (the runs on the GPU
// machine), where a missing driver, device or library is a failure, so that a
// broken binding cannot pass as "no GPU".
package gputest

import (
	"os"
	"testing"
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
