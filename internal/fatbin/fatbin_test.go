package fatbin

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// res is a kernel's REG and STACK as cuobjdump -res-usage prints them.
type res struct{ regs, stack int }

// readResUsage reads cuobjdump -res-usage output: per architecture, the
// functions of its cubins (kernels and device functions alike; a library
// built with -rdc lists a kernel once per cubin that has it, relocatable
// and linked).
// resField is one "NAME:VALUE" of a cuobjdump -res-usage line.
var resField = regexp.MustCompile(`([A-Z]+(?:\[\d+\])?)\s*:\s*(\d+)`)

func readResUsage(t *testing.T, path string) map[int]map[string][]res {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[int]map[string][]res{}
	arch, fn := 0, ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(l, "arch = sm_"):
			arch, _ = strconv.Atoi(strings.TrimPrefix(l, "arch = sm_"))
		case strings.HasPrefix(l, "Function "):
			fn = strings.TrimSuffix(strings.TrimPrefix(l, "Function "), ":")
		case strings.HasPrefix(l, "REG") && fn != "":
			var r res
			// "REG:96 STACK:552 SHARED:0 ...", whatever the spacing around the colons.
			for _, m := range resField.FindAllStringSubmatch(l, -1) {
				n, _ := strconv.Atoi(m[2])
				switch m[1] {
				case "REG":
					r.regs = n
				case "STACK":
					r.stack = n
				}
			}
			if out[arch] == nil {
				out[arch] = map[string][]res{}
			}
			out[arch][fn] = append(out[arch][fn], r)
			fn = ""
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkAgainstCuobjdump reads lib for every architecture its res-usage file
// lists and compares each kernel with what NVIDIA's cuobjdump said.
func checkAgainstCuobjdump(t *testing.T, lib, resUsage string) {
	t.Helper()
	checkAgainst(t, lib, readResUsage(t, resUsage))
}

func checkAgainst(t *testing.T, lib string, want map[int]map[string][]res) {
	t.Helper()
	if len(want) == 0 {
		t.Fatalf("cuobjdump lists no function for %s", lib)
	}
	for arch, fns := range want {
		start := time.Now()
		got, err := ReadLibrary(lib, arch/10, arch%10)
		if err != nil {
			t.Fatalf("%s for sm_%d: %v", lib, arch, err)
		}
		t.Logf("%s: sm_%d: %d kernels in %v", filepath.Base(lib), arch, len(got.Kernels), time.Since(start))
		if got.Arch != arch {
			t.Errorf("%s: read sm_%d for a device sm_%d", lib, got.Arch, arch)
		}
		if len(got.Kernels) == 0 {
			t.Errorf("%s: sm_%d: no kernels", lib, arch)
		}
		for _, k := range got.Kernels {
			ws, ok := fns[k.Name]
			if !ok {
				t.Errorf("%s: sm_%d: kernel %s is not in cuobjdump's output", lib, arch, k.Name)
				continue
			}
			if !slices.Contains(ws, res{k.Registers, k.StackBytes}) {
				t.Errorf("%s: sm_%d: %s: %d registers, stack %d B; cuobjdump: %v (REG, STACK)", lib, arch, k.Name, k.Registers, k.StackBytes, ws)
			}
		}
	}
}

// TestPtxasFixtures: cubins built by NVIDIA's ptxas (CUDA 11.8) into fat
// binaries by its fatbinary, plain and LZ4-compressed (testdata/ptxas/build.sh).
func TestPtxasFixtures(t *testing.T) {
	for _, v := range []string{"plain", "lz4"} {
		t.Run(v, func(t *testing.T) {
			lib := filepath.Join("testdata/ptxas", v+".so")
			checkAgainstCuobjdump(t, lib, filepath.Join("testdata/ptxas", v+".res-usage.txt"))
			got, err := ReadLibrary(lib, 9, 0)
			if err != nil {
				t.Fatal(err)
			}
			b := BudgetOf(HookCallers(got.Kernels))
			if b.Kernels != 2 || b.MinRegisters != 32 || b.MaxRegisters != 64 || b.Fewest != "fixture_r32" {
				t.Errorf("budget %+v: want 2 kernels, 32-64 registers, fewest fixture_r32", b)
			}
			if got := b.String(); got != "2 kernels call the hook, 32-64 registers (fewest: fixture_r32), stack 368-600 B" {
				t.Errorf("budget says %q", got)
			}
		})
	}
}

// nvccFixture is built by scripts/make-cubin-fixture.sh with nvcc (13.0 on
// the GPU machine): a shared library of kernels capped at 32 and 64
// registers that exports ncclProfilerDevFuncName, each variant beside
// cuobjdump -res-usage's output for it.
const nvccFixture = "testdata/nvcc"

// TestNvccFixture checks every library of the nvcc fixture against
// cuobjdump. It skips, naming the missing fixture, only where the fixture
// has not been built and committed yet.
func TestNvccFixture(t *testing.T) {
	libs, _ := filepath.Glob(filepath.Join(nvccFixture, "*.so"))
	if len(libs) == 0 {
		t.Skipf("fixture %s/*.so is missing: run scripts/make-cubin-fixture.sh on a machine with nvcc and commit %s", nvccFixture, nvccFixture)
	}
	for _, lib := range libs {
		t.Run(filepath.Base(lib), func(t *testing.T) {
			checkAgainstCuobjdump(t, lib, strings.TrimSuffix(lib, ".so")+".res-usage.txt")
			got, err := ReadLibrary(lib, 9, 0)
			if err != nil {
				t.Fatal(err)
			}
			if b := BudgetOf(HookCallers(got.Kernels)); b.MinRegisters != 32 || b.MaxRegisters != 64 {
				t.Errorf("budget %+v: want 32-64 registers", b)
			}
		})
	}
}

// TestRealLibraries reads the libraries NCCLHOOKS_FATBIN_LIBS lists
// (colon-separated: torch's libnccl.so.2, a patched NCCL, libcufft...) for
// sm_NCCLHOOKS_FATBIN_ARCH (default 90), logs how long it took and what the
// hook's callers allow, and compares every kernel with cuobjdump -res-usage
// where cuobjdump is found (PATH, /usr/local/cuda/bin, NCCLHOOKS_CUOBJDUMP).
func TestRealLibraries(t *testing.T) {
	libs := os.Getenv("NCCLHOOKS_FATBIN_LIBS")
	if libs == "" {
		t.Skip("NCCLHOOKS_FATBIN_LIBS names no library (scripts/gpu-check.sh budget sets it)")
	}
	arch := 90
	if v := os.Getenv("NCCLHOOKS_FATBIN_ARCH"); v != "" {
		arch, _ = strconv.Atoi(v)
	}
	cuobjdump := os.Getenv("NCCLHOOKS_CUOBJDUMP")
	if cuobjdump == "" {
		cuobjdump, _ = exec.LookPath("cuobjdump")
	}
	if cuobjdump == "" {
		if _, err := os.Stat("/usr/local/cuda/bin/cuobjdump"); err == nil {
			cuobjdump = "/usr/local/cuda/bin/cuobjdump"
		}
	}
	for _, lib := range strings.Split(libs, ":") {
		start := time.Now()
		got, err := ReadLibrary(lib, arch/10, arch%10)
		took := time.Since(start)
		if err != nil {
			t.Errorf("%s: %v", lib, err)
			continue
		}
		var size int64
		if fi, err := os.Stat(lib); err == nil {
			size = fi.Size()
		}
		t.Logf("%s (%d MB): sm_%d read in %v: %d containers, %d cubins, %d kernels; %v",
			lib, size>>20, got.Arch, took.Round(time.Microsecond), got.Containers, got.Cubins, len(got.Kernels), BudgetOf(HookCallers(got.Kernels)))
		if cuobjdump == "" {
			t.Logf("no cuobjdump: %s not compared", lib)
			continue
		}
		out, err := exec.Command(cuobjdump, "-res-usage", "-arch", fmt.Sprintf("sm_%d", got.Arch), lib).Output()
		if err != nil {
			t.Errorf("cuobjdump %s: %v", lib, err)
			continue
		}
		ru := filepath.Join(t.TempDir(), "res-usage.txt")
		if err := os.WriteFile(ru, out, 0o600); err != nil {
			t.Fatal(err)
		}
		want := readResUsage(t, ru)
		checkAgainst(t, lib, map[int]map[string][]res{got.Arch: want[got.Arch]})
	}
}

func TestPTXOnly(t *testing.T) {
	_, err := ReadLibrary("testdata/ptxas/ptx.so", 9, 0)
	var nc *NoCubinError
	if !errors.As(err, &nc) || len(nc.PTX) != 1 || nc.PTX[0] != 90 || len(nc.Cubins) != 0 {
		t.Fatalf("got %v, want a NoCubinError with PTX for sm_90 only", err)
	}
	if want := "no cubin for sm_90; PTX for sm_90, compiled by the driver at load"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
}

func TestNoCubinForTheDevice(t *testing.T) {
	_, err := ReadLibrary("testdata/ptxas/plain.so", 10, 0)
	var nc *NoCubinError
	if !errors.As(err, &nc) || nc.Error() != "no cubin for sm_100 (cubins for sm_80, sm_90); no PTX" {
		t.Fatalf("got %v", err)
	}
	// sm_86 loads the sm_80 cubin, as the driver does.
	lib, err := ReadLibrary("testdata/ptxas/plain.so", 8, 6)
	if err != nil || lib.Arch != 80 {
		t.Fatalf("sm_86: %v, arch %v", err, lib)
	}
}

func TestNoFatbin(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ReadLibrary(exe, 9, 0); !errors.Is(err, ErrNoFatbin) {
		t.Fatalf("the test binary: got %v, want ErrNoFatbin", err)
	}
	if _, err := ReadLibrary("fatbin.go", 9, 0); err == nil {
		t.Fatal("a Go source read as a library")
	}
}

// cubinOf returns the plain sm_90 cubin of the ptxas fixture.
func cubinOf(t *testing.T) []byte {
	t.Helper()
	sec := section(t, "testdata/ptxas/plain.so")
	cs, err := Containers(bytes.NewReader(sec), int64(len(sec)))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		for _, e := range c.Entries {
			if e.Kind == KindCubin && e.Arch == 90 {
				return sec[e.Offset : e.Offset+e.Size]
			}
		}
	}
	t.Fatal("no sm_90 cubin in the fixture")
	return nil
}

// entry is a synthetic entry: its header fields and payload.
type entry struct {
	kind, arch int
	flags      uint64
	payload    []byte
}

// container writes a fat binary container around entries, as fatbinary
// lays it out (64-byte entry headers, payloads padded to 8 bytes).
func container(es ...entry) []byte {
	var body []byte
	for _, e := range es {
		h := make([]byte, 64)
		stored := (len(e.payload) + 7) &^ 7
		binary.LittleEndian.PutUint16(h[0:], uint16(e.kind))
		binary.LittleEndian.PutUint16(h[2:], 0x101)
		binary.LittleEndian.PutUint32(h[4:], 64)
		binary.LittleEndian.PutUint64(h[8:], uint64(stored))
		binary.LittleEndian.PutUint32(h[28:], uint32(e.arch))
		binary.LittleEndian.PutUint64(h[40:], e.flags|0x11)
		if e.flags&(flagLZ4|flagZstd) != 0 {
			binary.LittleEndian.PutUint32(h[16:], uint32(len(e.payload)))
			binary.LittleEndian.PutUint64(h[56:], 1<<20)
		}
		body = append(body, h...)
		body = append(body, e.payload...)
		body = append(body, make([]byte, stored-len(e.payload))...)
	}
	h := make([]byte, 16)
	binary.LittleEndian.PutUint32(h, Magic)
	binary.LittleEndian.PutUint16(h[4:], 1)
	binary.LittleEndian.PutUint16(h[6:], 16)
	binary.LittleEndian.PutUint64(h[8:], uint64(len(body)))
	return append(h, body...)
}

// TestContainerWalk: the driver's choice per container (the third has no
// code for sm_90 at all), padding between
// containers, PTX-only containers counted, damaged headers refused.
func TestContainerWalk(t *testing.T) {
	cub := cubinOf(t)
	ptx := []byte(".version 7.8\n.target sm_90\n")
	var sec []byte
	sec = append(sec, container(entry{KindCubin, 70, 0, cub}, entry{KindCubin, 90, 0, cub}, entry{KindPTX, 90, 0, ptx})...)
	sec = append(sec, make([]byte, 24)...) // padding
	sec = append(sec, container(entry{KindPTX, 80, 0, ptx})...)
	for len(sec)%8 != 0 {
		sec = append(sec, 0)
	}
	sec = append(sec, container(entry{KindCubin, 86, 0, cub})...)

	cs, err := Containers(bytes.NewReader(sec), int64(len(sec)))
	if err != nil || len(cs) != 3 || len(cs[0].Entries) != 3 {
		t.Fatalf("containers: %v, %d", err, len(cs))
	}
	lib, err := Read(bytes.NewReader(sec), int64(len(sec)), 9, 0)
	if err != nil {
		t.Fatal(err)
	}
	if lib.Cubins != 1 || lib.PTXOnly != 1 || lib.Arch != 90 || len(lib.Kernels) != 2 {
		t.Errorf("sm_90: %+v", lib)
	}
	lib, err = Read(bytes.NewReader(sec), int64(len(sec)), 8, 9)
	if err != nil || lib.Cubins != 1 || lib.Arch != 86 || lib.PTXOnly != 1 {
		t.Errorf("sm_89: %v %+v", err, lib)
	}

	bad := append([]byte(nil), sec...)
	binary.LittleEndian.PutUint64(bad[8:], 1<<40) // container body past the end
	if _, err := Containers(bytes.NewReader(bad), int64(len(bad))); err == nil {
		t.Error("a container past the section's end was read")
	}
	bad = append([]byte(nil), sec...)
	binary.LittleEndian.PutUint64(bad[16+8:], 1<<40) // entry payload past the end
	if _, err := Containers(bytes.NewReader(bad), int64(len(bad))); err == nil {
		t.Error("an entry past its container's end was read")
	}
	bad = append([]byte(nil), sec...)
	bad[0] ^= 1
	if _, err := Containers(bytes.NewReader(bad), int64(len(bad))); err == nil || !strings.Contains(err.Error(), "magic") {
		t.Errorf("bad magic: %v", err)
	}

	unknown := container(entry{KindCubin, 90, flagOtherCompression, cub})
	var ce *CompressionError
	if _, err := Read(bytes.NewReader(unknown), int64(len(unknown)), 9, 0); !errors.As(err, &ce) {
		t.Errorf("unknown compression: %v", err)
	}
	corrupt := container(entry{KindCubin, 90, flagLZ4, []byte{0xf0, 1, 2}})
	if _, err := Read(bytes.NewReader(corrupt), int64(len(corrupt)), 9, 0); err == nil {
		t.Error("a corrupt LZ4 payload was read")
	}
}

func TestLZ4Block(t *testing.T) {
	// "abc" then a match of 9 at offset 3 (overlapping), then literal "Z".
	src := []byte{0x35, 'a', 'b', 'c', 3, 0, 0x10, 'Z'}
	dst := make([]byte, 13)
	if err := lz4Block(dst, src); err != nil || string(dst) != "abcabcabcabcZ" {
		t.Fatalf("%q %v", dst, err)
	}
	// 15+ literals: the length goes on in the next byte.
	lit := bytes.Repeat([]byte("x"), 20)
	src = append([]byte{0xf0, 5}, lit...)
	dst = make([]byte, 20)
	if err := lz4Block(dst, src); err != nil || !bytes.Equal(dst, lit) {
		t.Fatalf("long literals: %q %v", dst, err)
	}
	for _, bad := range [][]byte{{0x10, 'a', 5, 0}, {0x10, 'a', 0, 0}, {0xf0}, {0x20, 'a'}} {
		if err := lz4Block(make([]byte, 8), bad); err == nil {
			t.Errorf("%x decompressed", bad)
		}
	}
}

// FuzzRead: no section, however damaged, makes Read panic or hang.
func FuzzRead(f *testing.F) {
	sec := section(f, "testdata/ptxas/lz4.so")
	f.Add(sec[:min(len(sec), 4096)])
	f.Add(container(entry{KindCubin, 90, flagLZ4, []byte{0x35, 'a', 'b', 'c', 3, 0, 0x10, 'Z'}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		Read(bytes.NewReader(b), int64(len(b)), 9, 0)
	})
}

// TestRelocatableLeftUnread: beside a linked cubin, an -rdc object's
// relocatable one is told by its header and not read.
func TestRelocatableLeftUnread(t *testing.T) {
	cub := cubinOf(t)
	rel := append([]byte(nil), cub...)
	binary.LittleEndian.PutUint16(rel[16:], 1) // ET_REL
	sec := append(container(entry{KindCubin, 90, 0, rel}), container(entry{KindCubin, 90, 0, cub})...)
	lib, err := Read(bytes.NewReader(sec), int64(len(sec)), 9, 0)
	if err != nil || lib.Cubins != 1 || lib.Relocatable != 1 || len(lib.Kernels) != 2 {
		t.Fatalf("%v %+v", err, lib)
	}
	// Alone, a relocatable cubin is read.
	sec = container(entry{KindCubin, 90, 0, rel})
	if lib, err = Read(bytes.NewReader(sec), int64(len(sec)), 9, 0); err != nil || lib.Cubins != 1 || len(lib.Kernels) != 2 {
		t.Fatalf("alone: %v %+v", err, lib)
	}
}

func TestLZ4Prefix(t *testing.T) {
	src := []byte{0x35, 'a', 'b', 'c', 3, 0, 0x10, 'Z'}
	for n := 1; n <= 13; n++ {
		dst := make([]byte, n)
		if err := lz4Prefix(dst, src); err != nil || string(dst) != "abcabcabcabcZ"[:n] {
			t.Errorf("prefix %d: %q %v", n, dst, err)
		}
	}
	// The header of the LZ4 fixture's cubins, from its first bytes only.
	sec := section(t, "testdata/ptxas/lz4.so")
	cs, err := Containers(bytes.NewReader(sec), int64(len(sec)))
	if err != nil {
		t.Fatal(err)
	}
	linked, known := peekLinked(bytes.NewReader(sec), cs[0].Entries[0])
	if !linked || !known {
		t.Errorf("lz4 fixture: linked %v known %v", linked, known)
	}
}
