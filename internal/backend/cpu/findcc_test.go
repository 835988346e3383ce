package cpu

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FindCC skips a cc in a relative PATH entry (the working directory's) or
// in a directory others may write, takes the next safe one, and refuses a
// relative NCCL_HOOKS_CC; an absolute one is taken as named.
func TestFindCCSafely(t *testing.T) {
	dir := t.TempDir()
	mk := func(sub string, mode os.FileMode) string {
		d := filepath.Join(dir, sub)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "cc"), []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, mode); err != nil {
			t.Fatal(err)
		}
		return d
	}
	open, safe, rel := mk("open", 0o777), mk("safe", 0o755), mk("rel", 0o755)
	t.Chdir(dir)
	t.Setenv("PATH", "rel:"+open+"::"+safe)
	got, skipped, err := FindCC("")
	if err != nil || got != filepath.Join(safe, "cc") {
		t.Fatalf("FindCC = %q, %v; want %s", got, err, filepath.Join(safe, "cc"))
	}
	if len(skipped) != 2 || !strings.Contains(skipped[0], "relative") || !strings.Contains(skipped[1], "writable by group or others") {
		t.Errorf("skipped %q; want the relative entry's and the open directory's", skipped)
	}
	_ = rel
	t.Setenv("PATH", open)
	if _, _, err := FindCC("cc"); err == nil || !strings.Contains(err.Error(), "set NCCL_HOOKS_CC to the compiler's absolute path") {
		t.Errorf("only an unsafe cc in PATH: %v", err)
	}
	if _, _, err := FindCC("rel/cc"); err == nil || !strings.Contains(err.Error(), "absolute path") {
		t.Errorf("a relative NCCL_HOOKS_CC: %v", err)
	}
	if got, _, err := FindCC(filepath.Join(open, "cc")); err != nil || got != filepath.Join(open, "cc") {
		t.Errorf("an absolute NCCL_HOOKS_CC is the job's choice: %q, %v", got, err)
	}
}
