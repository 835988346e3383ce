package main

import (
	"debug/elf"
	"os"
	"testing"
)

// The plugin is dlopened into processes that have already placed their
// static TLS: its own thread-local storage must stay small, or dlopen fails
// with "cannot allocate memory in static TLS block" (a 256 KiB __thread
// buffer in a test shim did that to every CLI run).
func TestPluginThreadLocalStorageIsSmall(t *testing.T) {
	path := os.Getenv("NCCLHOOKS_PLUGIN")
	if path == "" {
		t.Skip("NCCLHOOKS_PLUGIN not set (make test sets it)")
	}
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const limit = 4096
	for _, p := range f.Progs {
		if p.Type == elf.PT_TLS && p.Memsz > limit {
			t.Errorf("%s: %d B of thread-local storage, want at most %d", path, p.Memsz, limit)
		}
	}
}
