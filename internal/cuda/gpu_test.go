package cuda

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
	"unsafe"

	"github.com/ncclhooks/ncclhooks/internal/abi"
	"github.com/ncclhooks/ncclhooks/internal/gputest"
)

// openGPU opens device 0 or skips the test where there is no usable GPU.
func openGPU(t *testing.T) *Device {
	t.Helper()
	lib, err := OpenGPU()
	gputest.Open(t, err)
	d, err := lib.Device(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Error(err)
		}
	})
	t.Logf("%v; %v", lib, d)
	return d
}

// hookSrc is a minimal hook module following docs/ARCHITECTURE.md's symbol
// names: the entry counts calls in the counter its ctx points at. It reaches
// its state only through ctx: code called from another module's kernel must
// not name its own module's __device__ or __constant__ variables, whose
// addresses come from constant banks bound to the running kernel's module,
// i.e. the caller's.
var hookSrc = abi.Header + `
extern "C" __device__ unsigned long long hook_counter;
__device__ unsigned long long hook_counter;
extern "C" __device__ void ncclhooks_entry(const ncclProfilerDevEvent_t* ev, void* ctx) {
	atomicAdd((unsigned long long*)ctx, 1ull + ev->phase);
}
// Typed: a (void*) cast would make the initialiser dynamic, which NVRTC refuses.
extern "C" __device__ ncclProfilerDevHook_t ncclhooks_entry_ptr;
__device__ ncclProfilerDevHook_t ncclhooks_entry_ptr = ncclhooks_entry;
`

// callerSrc is a kernel in another module that calls a hook through a
// pointer, as NCCL's kernels do: thread 0 of every block, n events of phase 1.
var callerSrc = abi.Header + `
extern "C" __global__ void call_hook(ncclProfilerDevHook_t fn, void* ctx, int n) {
	if (threadIdx.x != 0) return;
	for (int i = 0; i < n; i++) {
		ncclProfilerDevEvent_t ev = {0, (unsigned long long)i, 0, (unsigned char)blockIdx.x, NCCLHOOKS_PHASE_STOP, 0};
		fn(&ev, ctx);
	}
}
extern "C" __global__ void fill(unsigned* p, unsigned v, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) p[i] = v + i;
}
`

func mustCompile(t *testing.T, d *Device, src string, opt CompileOptions) *Image {
	t.Helper()
	img, err := d.Compile(src, opt)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func mustLoad(t *testing.T, d *Device, cubin []byte) *Module {
	t.Helper()
	m, err := d.LoadCubin(cubin)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Unload() })
	return m
}

func readU64(t *testing.T, d *Device, p uint64) uint64 {
	t.Helper()
	var b [8]byte
	if err := d.CopyDtoH(b[:], p, nil); err != nil {
		t.Fatal(err)
	}
	return binary.LittleEndian.Uint64(b[:])
}

// callThrough launches the caller module's kernel with the hook address and
// checks the hook module's counter: 2 per call (phase 1 adds 1+1).
func callThrough(t *testing.T, d *Device, hook, caller *Module, entry uint64) {
	t.Helper()
	counter, _, err := hook.Global("hook_counter")
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Memset(counter, 0, 8, nil); err != nil {
		t.Fatal(err)
	}
	f, err := caller.Function("call_hook")
	if err != nil {
		t.Fatal(err)
	}
	const blocks, n = 32, 100
	if err := d.Launch(f, [3]uint32{blocks, 1, 1}, [3]uint32{32, 1, 1}, 0, nil, entry, counter, int32(n)); err != nil {
		t.Fatal(err)
	}
	if err := d.Synchronize(); err != nil {
		t.Fatalf("the caller faulted calling %#x: %v", entry, err)
	}
	if got := readU64(t, d, counter); got != 2*blocks*n {
		t.Fatalf("hook counter = %d, want %d", got, 2*blocks*n)
	}
}

func TestGPUResolvedAddressIsCallableFromAnotherModule(t *testing.T) {
	d := openGPU(t)
	hookImg := mustCompile(t, d, hookSrc, CompileOptions{Name: "hook.cu", Link: true})
	callerImg := mustCompile(t, d, callerSrc, CompileOptions{Name: "caller.cu"})
	hook := mustLoad(t, d, hookImg.Cubin)
	caller := mustLoad(t, d, callerImg.Cubin)
	entry, err := hook.ReadPointer("ncclhooks_entry_ptr")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("compile+link %v (link %v, %d-byte cubin, options %q), load %v, ncclhooks_entry = %#x",
		hookImg.CompileTime, hookImg.LinkTime, len(hookImg.Cubin), hookImg.Options, hook.LoadTime, entry)
	if !hookImg.Linked {
		t.Fatal("Link: true did not link")
	}
	if entry < 1<<32 {
		t.Fatalf("rdc entry address %#x looks module-relative", entry)
	}
	callThrough(t, d, hook, caller, entry)
}

func TestGPUWholeProgramAddressIsModuleRelative(t *testing.T) {
	d := openGPU(t)
	img := mustCompile(t, d, hookSrc, CompileOptions{Name: "hook.cu", WholeProgram: true})
	m := mustLoad(t, d, img.Cubin)
	entry, err := m.ReadPointer("ncclhooks_entry_ptr")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("whole-program ncclhooks_entry = %#x", entry)
	if entry >= 1<<32 {
		t.Fatalf("whole-program address %#x is absolute: the module-relative check would not catch it", entry)
	}
}

func TestGPULink(t *testing.T) {
	d := openGPU(t)
	hookImg := mustCompile(t, d, hookSrc, CompileOptions{Name: "hook.cu"})
	caller := mustLoad(t, d, mustCompile(t, d, callerSrc, CompileOptions{Name: "caller.cu"}).Cubin)
	linkers := map[string]func([][]byte) ([]byte, error){"cuLink": d.linkDriver}
	if d.lib.HasJitLink() {
		linkers["nvJitLink"] = d.linkJit
	} else {
		t.Log("nvJitLink not found; only cuLink* tested")
	}
	for name, link := range linkers {
		t.Run(name, func(t *testing.T) {
			t0 := nowMs()
			cubin, err := link([][]byte{hookImg.Cubin})
			if err != nil {
				t.Fatal(err)
			}
			linkMs := nowMs() - t0
			m := mustLoad(t, d, cubin)
			entry, err := m.ReadPointer("ncclhooks_entry_ptr")
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: link %.1f ms, load %v, entry %#x", name, linkMs, m.LoadTime, entry)
			if entry < 1<<32 {
				t.Fatalf("linked entry %#x is module-relative", entry)
			}
			callThrough(t, d, m, caller, entry)
		})
	}
}

func TestGPUCompileCache(t *testing.T) {
	d := openGPU(t)
	c, err := OpenCache(filepath.Join(t.TempDir(), "cache"))
	if err != nil {
		t.Fatal(err)
	}
	opt := CompileOptions{Name: "hook.cu", Cache: c, Link: true}
	cold := mustCompile(t, d, hookSrc, opt)
	warm := mustCompile(t, d, hookSrc, opt)
	t.Logf("cold %v, warm %v", cold.CompileTime, warm.CompileTime)
	if cold.CacheHit || !warm.CacheHit || string(cold.Cubin) != string(warm.Cubin) {
		t.Fatalf("cold hit=%v warm hit=%v, same cubin %v", cold.CacheHit, warm.CacheHit, string(cold.Cubin) == string(warm.Cubin))
	}
	// Corrupt the entry: the next compile must notice, rebuild, and load.
	p := filepath.Join(c.Dir(), cold.CacheKey+".cubin")
	b, _ := os.ReadFile(p)
	b[len(b)/2] ^= 0xff
	os.WriteFile(p, b, 0o600)
	again := mustCompile(t, d, hookSrc, opt)
	if again.CacheHit || again.CacheRepaired == "" {
		t.Fatalf("corrupt entry: hit=%v repaired=%q", again.CacheHit, again.CacheRepaired)
	}
	if _, err := mustLoad(t, d, again.Cubin).ReadPointer("ncclhooks_entry_ptr"); err != nil {
		t.Fatal(err)
	}
	// A linked and an unlinked build of one source are different entries.
	if unlinked := mustCompile(t, d, hookSrc, CompileOptions{Name: "hook.cu", Cache: c}); unlinked.CacheHit {
		t.Fatal("the unlinked build was served the linked entry")
	}
}

func TestGPUCompileError(t *testing.T) {
	d := openGPU(t)
	_, err := d.Compile("extern \"C\" __global__ void k() {\n  int x = ;\n}\n", CompileOptions{Name: "bad.cu"})
	var ce *CompileError
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v, want a *CompileError", err)
	}
	if len(ce.Lines) == 0 || ce.Lines[0].Line != 2 || ce.Lines[0].File != "bad.cu" {
		t.Fatalf("diagnostics = %+v, want one on bad.cu line 2; log:\n%s", ce.Lines, ce.Log)
	}
	if _, err := d.Compile("", CompileOptions{Options: []string{"-arch=sm_80"}}); err == nil {
		t.Fatal("a conflicting -arch option was accepted")
	}
}

// spinSrc keeps a stream busy for ns nanoseconds.
const spinSrc = `
extern "C" __global__ void spin(unsigned long long ns) {
	unsigned long long t0, t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
	do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
}
`

// TestGPUAllocZeroedBeforeLaterCopies: memory from Alloc, written at once on
// the private stream, keeps what was written while other work holds the
// legacy default stream. Zeroing it there (cuMemsetD8) lets the zeros land
// after the copy: a communicator's context then read as zeros in the caller's
// kernel (the caller matrix's faults with six processes on the GPU).
func TestGPUAllocZeroedBeforeLaterCopies(t *testing.T) {
	d := openGPU(t)
	m := mustLoad(t, d, mustCompile(t, d, spinSrc, CompileOptions{Name: "spin.cu"}).Cubin)
	spin, err := m.Function("spin")
	if err != nil {
		t.Fatal(err)
	}
	legacy := d.legacyStream()
	if err := d.Launch(spin, [3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, 0, legacy, uint64(300e6)); err != nil {
		t.Fatal(err)
	}
	p, err := d.Alloc(64)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Free(p)
	want := bytes.Repeat([]byte{0xab}, 64)
	if err := d.CopyHtoD(p, want, nil); err != nil {
		t.Fatal(err)
	}
	if err := legacy.Sync(); err != nil { // the spin and whatever was queued behind it
		t.Fatal(err)
	}
	got := make([]byte, 64)
	if err := d.CopyDtoH(got, p, nil); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("memory from Alloc, written on the private stream, reads % x after the legacy stream drained: "+
			"its zeroing ran after the copy", got[:16])
	}
}

func TestGPUMemoryStreamsEventsGraphs(t *testing.T) {
	d := openGPU(t)
	m := mustLoad(t, d, mustCompile(t, d, callerSrc, CompileOptions{Name: "caller.cu"}).Cubin)
	fill, err := m.Function("fill")
	if err != nil {
		t.Fatal(err)
	}
	s, err := d.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()

	// Device memory: copy in, kernel, copy out.
	const n = 1000
	p, err := d.Alloc(4 * n)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Free(p)
	if err := d.Launch(fill, [3]uint32{(n + 255) / 256, 1, 1}, [3]uint32{256, 1, 1}, 0, s, p, uint32(7), int32(n)); err != nil {
		t.Fatal(err)
	}
	out := make([]byte, 4*n)
	if err := d.CopyDtoH(out, p, s); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if v := binary.LittleEndian.Uint32(out[4*i:]); v != uint32(7+i) {
			t.Fatalf("p[%d] = %d, want %d", i, v, 7+i)
		}
	}
	in := make([]byte, 16)
	binary.LittleEndian.PutUint64(in, 0xdeadbeef)
	if err := d.CopyHtoD(p, in, nil); err != nil {
		t.Fatal(err)
	}
	if got := readU64(t, d, p); got != 0xdeadbeef {
		t.Fatalf("after CopyHtoD read %#x", got)
	}

	// Host-mapped memory: the kernel writes it, the host reads it directly.
	host, dev, err := d.HostAlloc(4 * n)
	if err != nil {
		t.Fatal(err)
	}
	defer d.FreeHost(host)
	view := unsafe.Slice((*uint32)(host), n)
	if view[n-1] != 0 {
		t.Fatal("HostAlloc memory is not zeroed")
	}

	// Events around a graph of two fills, replayed 3 times.
	start, _ := d.NewEvent()
	end, _ := d.NewEvent()
	defer start.Destroy()
	defer end.Destroy()
	if err := s.BeginCapture(); err != nil {
		t.Fatal(err)
	}
	for _, base := range []uint32{100, 200} {
		if err := d.Launch(fill, [3]uint32{(n + 255) / 256, 1, 1}, [3]uint32{256, 1, 1}, 0, s, dev, base, int32(n)); err != nil {
			t.Fatal(err)
		}
	}
	g, err := s.EndCapture()
	if err != nil {
		t.Fatal(err)
	}
	defer g.Destroy()
	if view[0] != 0 {
		t.Fatal("a captured launch ran during capture")
	}
	start.Record(s)
	for range 3 {
		if err := g.Launch(s); err != nil {
			t.Fatal(err)
		}
	}
	end.Record(s)
	if err := end.Sync(); err != nil {
		t.Fatal(err)
	}
	ms, err := ElapsedMs(start, end)
	if err != nil || ms <= 0 {
		t.Fatalf("ElapsedMs = %v, %v", ms, err)
	}
	if view[0] != 200 || view[n-1] != 200+n-1 {
		t.Fatalf("graph replay wrote %d..%d, want 200..%d", view[0], view[n-1], 200+n-1)
	}
	t.Logf("3 graph replays: %.3f ms", ms)
}

func nowMs() float64 { return float64(time.Now().UnixNano()) / 1e6 }

// TestGPURelocatableNeedsLink backs CompileOptions.Link's advice: linked,
// a relocatable module keeps its kernel-less symbols (ncclhooks_entry_ptr, a
// __constant__ array); what the driver does with it unlinked is logged.
func TestGPURelocatableNeedsLink(t *testing.T) {
	d := openGPU(t)
	src := hookSrc + "extern \"C\" __constant__ unsigned long long hook_const[4];\n__constant__ unsigned long long hook_const[4];\n"
	direct := mustCompile(t, d, src, CompileOptions{Name: "hook.cu"})
	if m, err := d.LoadCubin(direct.Cubin); err != nil {
		t.Logf("unlinked relocatable cubin: %v", err)
	} else {
		_, err := m.ReadPointer("ncclhooks_entry_ptr")
		t.Logf("unlinked relocatable cubin loaded; ncclhooks_entry_ptr: %v", err)
		m.Unload()
	}
	linked := mustCompile(t, d, src, CompileOptions{Name: "hook.cu", Link: true})
	m := mustLoad(t, d, linked.Cubin)
	if _, _, err := m.Global("hook_const"); err != nil {
		t.Fatal(err)
	}
	entry, err := m.ReadPointer("ncclhooks_entry_ptr")
	if err != nil || entry < 1<<32 {
		t.Fatalf("linked entry = %#x, %v", entry, err)
	}
}
