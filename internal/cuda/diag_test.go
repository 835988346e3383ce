package cuda

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseLog(t *testing.T) {
	log := `profile.cu(12): error: identifier "foo" is undefined
      foo = 1;
      ^

profile.cu(3): warning #177-D: variable "x" was declared but never referenced
profile.cu(40): catastrophic error: cannot open source file "nope.h"
1 error detected in the compilation of "profile.cu".
`
	want := []DiagLine{
		{File: "profile.cu", Line: 12, Kind: "error", Msg: `identifier "foo" is undefined`},
		{File: "profile.cu", Line: 3, Kind: "warning", Msg: `variable "x" was declared but never referenced`},
		{File: "profile.cu", Line: 40, Kind: "catastrophic error", Msg: `cannot open source file "nope.h"`},
	}
	if got := ParseLog(log); !reflect.DeepEqual(got, want) {
		t.Fatalf("ParseLog =\n%+v\nwant\n%+v", got, want)
	}
	e := &CompileError{Name: "profile.cu", Log: log, Lines: want}
	if msg := e.Error(); !strings.Contains(msg, "line 12") || !strings.Contains(msg, "1 more") {
		t.Fatalf("CompileError.Error() = %q", msg)
	}
}

func TestArgBits(t *testing.T) {
	cases := []struct {
		in   any
		want uint64
	}{
		{uint64(1 << 40), 1 << 40}, {int32(-1), 0xffffffff}, {float32(1), 0x3f800000},
		{int8(-2), 0xfe}, {true, 1}, {uintptr(7), 7},
	}
	for _, c := range cases {
		if got, err := argBits(c.in); err != nil || got != c.want {
			t.Errorf("argBits(%T %v) = %#x, %v; want %#x", c.in, c.in, got, err, c.want)
		}
	}
	if _, err := argBits("s"); err == nil {
		t.Error("a string was accepted as a kernel argument")
	}
}

func TestLoadLibMissingIsAnError(t *testing.T) {
	_, _, err := loadLib([]string{"libncclhooks-no-such-lib.so.9"}, []string{t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "libncclhooks-no-such-lib.so.9") {
		t.Fatalf("err = %v, want one naming the library", err)
	}
}
