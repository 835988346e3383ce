package fatbin

import (
	"debug/elf"
	"testing"
)

// section returns the .nv_fatbin section of the library at path.
func section(t testing.TB, path string) []byte {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := f.Section(".nv_fatbin")
	if s == nil {
		t.Fatalf("%s has no .nv_fatbin", path)
	}
	b, err := s.Data()
	if err != nil {
		t.Fatal(err)
	}
	return b
}
