package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestEveryKnobInTheReadme: each NCCL_HOOKS_* variable the plugin reads
// has its row in the README's knob table, and each row names one it reads.
func TestEveryKnobInTheReadme(t *testing.T) {
	src, err := os.ReadFile("knobs.go")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	read := map[string]bool{}
	for _, m := range regexp.MustCompile(`getenv\("(NCCL_HOOKS_[A-Z0-9_]+)"\)`).FindAllStringSubmatch(string(src), -1) {
		read[m[1]] = true
	}
	if len(read) < 10 {
		t.Fatalf("found only %d knobs in knobs.go: the pattern is stale", len(read))
	}
	rows := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(NCCL_HOOKS_[A-Z0-9_]+)` \\|").FindAllStringSubmatch(string(readme), -1) {
		rows[m[1]] = true
	}
	for k := range read {
		if !rows[k] {
			t.Errorf("%s is read by the plugin but has no row in the README's knob table", k)
		}
	}
	for k := range rows {
		if !read[k] && !strings.Contains(string(src), k) {
			t.Errorf("the README's knob table has %s, which the plugin does not read", k)
		}
	}
}

// TestReloadKnob: NCCL_HOOKS_RELOAD's values, and a refusal that says
// what to give.
func TestReloadKnob(t *testing.T) {
	for v, want := range map[string]string{"": "0s", "off": "0s", "0": "0s", "on": "250ms", "1": "250ms", "20ms": "20ms", "1m": "1m0s"} {
		t.Setenv("NCCL_HOOKS_RELOAD", v)
		k, err := readKnobs()
		if err != nil || k.Reload.String() != want {
			t.Errorf("NCCL_HOOKS_RELOAD=%q: %v, %v; want %s", v, k.Reload, err, want)
		}
	}
	for _, v := range []string{"yes", "0.5ms", "2m", "-1s"} {
		t.Setenv("NCCL_HOOKS_RELOAD", v)
		if _, err := readKnobs(); err == nil || !strings.Contains(err.Error(), "NCCL_HOOKS_RELOAD=") || !strings.Contains(err.Error(), "on (") {
			t.Errorf("NCCL_HOOKS_RELOAD=%q: %v, want a refusal naming the knob and its values", v, err)
		}
	}
}
