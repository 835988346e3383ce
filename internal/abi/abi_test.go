package abi_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/ncclhooks/ncclhooks/internal/abi"
	"github.com/ncclhooks/ncclhooks/internal/abi/internal/cabi"
)

// The Go twin has the C struct's size and, member for member (by the c tag),
// its offsets and sizes, in the same order.
func TestDevEventLayout(t *testing.T) {
	size, members := cabi.Layout(cabi.Event)
	if size != abi.DevEventSize || unsafe.Sizeof(abi.DevEvent{}) != abi.DevEventSize {
		t.Errorf("sizeof(ncclProfilerDevEvent_t) = %d, unsafe.Sizeof(DevEvent) = %d, DevEventSize = %d",
			size, unsafe.Sizeof(abi.DevEvent{}), abi.DevEventSize)
	}
	ty := reflect.TypeFor[abi.DevEvent]()
	if ty.NumField() != len(members) {
		t.Fatalf("DevEvent has %d fields, ncclProfilerDevEvent_t %d members", ty.NumField(), len(members))
	}
	for i, m := range members {
		f := ty.Field(i)
		if name := f.Tag.Get("c"); name != m.Name || f.Offset != m.Offset || f.Type.Size() != m.Size {
			t.Errorf("field %d: Go %s (c:%q) at %d, %d bytes; C %s at %d, %d bytes",
				i, f.Name, name, f.Offset, f.Type.Size(), m.Name, m.Offset, m.Size)
		}
	}
}

// The header's constants have the Go twin's values.
func TestConstants(t *testing.T) {
	for macro, want := range map[string]int{
		"NCCLHOOKS_PHASE_START": abi.PhaseStart,
		"NCCLHOOKS_PHASE_STOP":  abi.PhaseStop,
		"NCCL_LOG_WARN":         abi.LogWarn,
		"NCCL_LOG_INFO":         abi.LogInfo,
		"NCCL_PROFILE":          abi.SubsysProfile,
	} {
		if got, ok := cabi.Macros[macro]; !ok || got != want {
			t.Errorf("%s = %d (defined %v), Go twin %d", macro, got, ok, want)
		}
	}
}

// DecodeDevEvent reads back what C wrote, every member distinct.
func TestDecodeDevEvent(t *testing.T) {
	want := abi.DevEvent{Timestamp: 0x1122334455667788, WorkCounter: 0x99aabbccddeeff01, FuncID: 0x12345678,
		ChannelID: 63, Phase: abi.PhaseStop, Rsvd: 0xbeef}
	b := cabi.EventBytes(want.Timestamp, want.WorkCounter, want.FuncID, want.ChannelID, want.Phase, want.Rsvd)
	if got := abi.DecodeDevEvent(b); got != want {
		t.Errorf("DecodeDevEvent(C bytes) = %+v, want %+v", got, want)
	}
	if got := abi.AppendDevEvent([]byte{0xff}, want); string(got) != "\xff"+string(b) {
		t.Errorf("AppendDevEvent = % x, want ff and the C bytes % x", got, b)
	}
	// The Go twin's own memory is the same bytes.
	if got := unsafe.Slice((*byte)(unsafe.Pointer(&want)), abi.DevEventSize); string(got) != string(b) {
		t.Errorf("Go memory % x, C memory % x", got, b)
	}
}

// The profiler structs: v7 is name and the six functions of v6 then
// getDeviceHook, one pointer each; v5 and v6 are v7's prefix.
func TestProfilerLayout(t *testing.T) {
	ptr := unsafe.Sizeof(uintptr(0))
	names := []string{"name", "init", "startEvent", "stopEvent", "recordEventState", "finalize", "getDeviceHook"}
	for _, s := range []struct {
		which cabi.Struct
		n     int
	}{{cabi.ProfilerV7, 7}, {cabi.ProfilerV6, 6}, {cabi.ProfilerV5, 6}} {
		size, members := cabi.Layout(s.which)
		if size != uintptr(s.n)*ptr || len(members) != s.n {
			t.Errorf("ncclProfiler_v%d_t: %d bytes, %d members; want %d pointers", s.which, size, len(members), s.n)
			continue
		}
		for i, m := range members {
			if m.Name != names[i] || m.Offset != uintptr(i)*ptr || m.Size != ptr {
				t.Errorf("ncclProfiler_v%d_t member %d: %s at %d (%d bytes), want %s at %d", s.which, i, m.Name, m.Offset, m.Size, names[i], uintptr(i)*ptr)
			}
		}
	}
}

// The header compiles in every dialect that includes it: C (the plugin, the
// harness, the cpu backend's generated hooks: cc), C++ (c++) and CUDA
// (nvcc, where installed); its static asserts hold in each. NVRTC compiles it
// inside every generated module and GPU harness source (the GPU tests).
func TestHeaderCompiles(t *testing.T) {
	dir := t.TempDir()
	use := "#include \"" + "ncclhooks_abi.h" + "\"\n" +
		"static void call(ncclProfilerDevHook_t h, void* ctx) {\n" +
		"  ncclProfilerDevEvent_t ev = {1, 2, 3, 4, NCCLHOOKS_PHASE_STOP, 0};\n  h(&ev, ctx);\n}\n" +
		"void (*keep)(ncclProfilerDevHook_t, void*) = call;\n"
	inc, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	builds := []struct {
		compiler, file string
		args           []string
	}{
		{"cc", "t.c", []string{"-std=c99", "-Wall", "-Wextra", "-pedantic", "-Werror"}},
		{"cc", "t.c", []string{"-std=c11", "-Wall", "-Wextra", "-pedantic", "-Werror"}},
		{"c++", "t.cc", []string{"-std=c++11", "-Wall", "-Wextra", "-Werror"}},
		{"nvcc", "t.cu", []string{"-std=c++17", "-rdc=true", "-Werror", "all-warnings"}},
	}
	for _, b := range builds {
		t.Run(b.compiler+" "+strings.Join(b.args[:1], " "), func(t *testing.T) {
			path, err := exec.LookPath(b.compiler)
			if err != nil {
				if b.compiler == "nvcc" {
					t.Skipf("no nvcc: %v", err)
				}
				t.Fatalf("%s: %v", b.compiler, err)
			}
			src := filepath.Join(dir, b.file)
			text := use
			if b.compiler == "nvcc" {
				text += "__global__ void k(ncclProfilerDevHook_t h, void* c) { call(h, c); }\n"
				text = strings.Replace(text, "static void call", "static __device__ void call", 1)
				text = strings.Replace(text, "void (*keep)(ncclProfilerDevHook_t, void*) = call;\n", "", 1)
			}
			if err := os.WriteFile(src, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			args := append(append([]string{}, b.args...), "-I"+inc, "-c", "-o", filepath.Join(dir, b.file+".o"), src)
			if out, err := exec.Command(path, args...).CombinedOutput(); err != nil {
				t.Errorf("%s %s: %v\n%s", b.compiler, strings.Join(args, " "), err, out)
			}
		})
	}
}

// The sources compiled at run time get the header without NCCL's host
// event descriptors, and only without them.
func TestModuleHeader(t *testing.T) {
	if !strings.Contains(abi.Header, "ncclProfilerEventDescr_v7_t") || strings.Contains(abi.ModuleHeader, "ncclProfilerEventDescr") {
		t.Fatal("abi.ModuleHeader must be Header without the host event descriptors")
	}
	if got := len(abi.Header) - len(abi.ModuleHeader); got <= 0 || !strings.Contains(abi.ModuleHeader, "ncclProfiler_v7_t") || !strings.HasSuffix(abi.ModuleHeader, "#endif // NCCLHOOKS_ABI_H\n") {
		t.Fatalf("abi.ModuleHeader lost more than the host events (%d bytes fewer)", got)
	}
}
