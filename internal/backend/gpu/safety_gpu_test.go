package gpu

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/ncclhooks/ncclhooks/internal/config"
	"github.com/ncclhooks/ncclhooks/internal/cuda"
	"github.com/ncclhooks/ncclhooks/internal/hookgen"
	"github.com/ncclhooks/ncclhooks/internal/hookgen/hooktest"
)

// latencyHook pairs START and STOP on the device and keeps a histogram, a
// float sum of microseconds (the prelude's division, inlined) and a minimum:
// more registers without a stack frame than the record hook needs. (With the
// histogram alone it stopped needing more once it read its cells at constant
// offsets from devCtx: both 38 with NVRTC 13 on the H200.)
func latencyHook(t *testing.T) *config.Hook {
	h := hooktest.Hook("lat")
	h.When = hooktest.MustExpr(t, "phase == STOP && paired")
	us := hooktest.Let(t, "us", "duration / 1000")
	h.Lets = []*config.Let{us}
	h.Aggregates = []*config.Aggregate{{Name: "d", Kind: config.AggHistogram, Value: hooktest.MustExpr(t, "duration"),
		By: []string{"funcId"}, Buckets: config.Buckets{Log2: true}, Pos: config.Pos{File: "p.yaml", Line: 9, Col: 7}},
		{Name: "us", Kind: config.AggSum, Value: hooktest.MustExpr(t, "us", us), By: []string{"funcId", "channelId"}},
		{Name: "lo", Kind: config.AggMin, Value: hooktest.MustExpr(t, "duration * 3 - 7"), By: []string{"channelId"}}}
	h.Pos = config.Pos{File: "p.yaml", Line: 7, Col: 5}
	return h
}

// TestGPURefusesWhatCouldFaultTheCaller: at a low enough register budget
// the latency hook cannot be built without a stack frame while the record
// hook can (which budget that is depends on the compiler: the first such cap
// from the calling convention's minimum up is used). There Compile leaves the
// latency hook out, names its profile position, and hands out the rest, which
// runs; alone, it is an *UnsafeModuleError. At NCCL's budget both fit.
func TestGPURefusesWhatCouldFaultTheCaller(t *testing.T) {
	lib := openLib(t)
	arch, _ := lib.DeviceArch(0)
	rec := hooktest.Hook("all", "timestamp", "workCounter", "channelId", "phase")
	rec.Pos = config.Pos{File: "p.yaml", Line: 4, Col: 5}
	both, err := hookgen.Generate(hooktest.Profile(rec, latencyHook(t)))
	if err != nil {
		t.Fatal(err)
	}
	alone := func(h *config.Hook, budget int) error {
		m, err := hookgen.Generate(hooktest.Profile(h))
		if err != nil {
			t.Fatal(err)
		}
		_, err = Compile(m, lib, Options{Budget: budget})
		return err
	}
	budget, refusing := DefaultRegisterBudget, false
	for _, b := range registerCaps(DefaultRegisterBudget) {
		recErr, latErr := alone(rec, b), alone(latencyHook(t), b)
		var ue *UnsafeModuleError
		if recErr == nil && errors.As(latErr, &ue) {
			if !strings.Contains(latErr.Error(), "p.yaml:7:5") {
				t.Fatalf("the latency hook alone at budget %d: %v, want an error naming p.yaml:7:5", b, latErr)
			}
			t.Logf("budget %d: the record hook fits, the latency hook alone: %v", b, latErr)
			budget, refusing = b, true
			break
		}
		if recErr == nil && latErr == nil {
			t.Logf("this compiler builds the latency hook frame-free wherever it builds the record hook (both from budget %d): no refusal to check here", b)
			break
		}
	}
	c, err := Compile(both, lib, Options{Budget: budget})
	if err != nil {
		t.Fatal(err)
	}
	res, cap := c.Resources(arch)
	t.Logf("budget %d: refused %v; built %v at --maxrregcount=%d", budget, c.Refused(), res, cap)
	if res.Registers > budget || res.FrameBytes != 0 || len(res.Calls) != 0 {
		t.Fatalf("accepted an unsafe build: %v", res)
	}
	if r := c.Refused(); !refusing && len(r) != 0 {
		t.Fatalf("refused %v at budget %d, where each hook alone fits", r, budget)
	} else if refusing {
		if len(r) != 1 || r[0].Hook != "lat" || !strings.Contains(r[0].String(), "p.yaml:7:5") {
			t.Fatalf("refused %v, want only the latency hook, at p.yaml:7:5", r)
		}
		if hs := c.Module().Hooks; len(hs) != 1 || hs[0].Name != "all" {
			t.Fatalf("the module built has hooks %v, want just all", hs)
		}
	}
	p := loadCompiled(t, c)
	p.run(t, 4, 64)

	c, err = Compile(both, lib, Options{})
	if err != nil || len(c.Refused()) != 0 || len(c.Module().Hooks) != 2 {
		t.Fatalf("at the default budget: %v, refused %v", err, c.Refused())
	}
	res, cap = c.Resources(arch)
	t.Logf("budget %d: %v at --maxrregcount=%d", DefaultRegisterBudget, res, cap)
	if res.Registers > DefaultRegisterBudget || res.FrameBytes != 0 || len(res.Calls) != 0 || len(res.Addresses) != 0 {
		t.Fatalf("accepted an unsafe build: %v", res)
	}
}

// TestGPUCompilerDivisionIsRefused: the compiler's own double division (a
// call into its slow path) is what hk_div replaces; a module that uses it
// anyway is refused, with the call named.
func TestGPUCompilerDivisionIsRefused(t *testing.T) {
	lib := openLib(t)
	h := hooktest.Hook("d", "channelId", "workCounter", "phase")
	h.Lets = []*config.Let{hooktest.Let(t, "q", "timestamp / (channelId + 1)")}
	h.Fields = append(h.Fields, &config.Field{Name: "q", Source: "q", Type: config.F64})
	m, err := hookgen.Generate(hooktest.Profile(h))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(m.Source, "hk_div(") {
		t.Fatal("the generated division is not hk_div")
	}
	if _, err := Compile(m, lib, Options{}); err != nil {
		t.Fatalf("hk_div: %v", err)
	}
	bad := *m
	bad.Source = strings.Replace(m.Source, "HK_FN double hk_div(double a, double b) {", "HK_FN double hk_div(double a, double b) { return a / b;", 1)
	_, err = Compile(&bad, lib, Options{})
	if err == nil || !strings.Contains(err.Error(), "stack frame") {
		t.Fatalf("the compiler's division was accepted: %v", err)
	}
	t.Log(err)
}

// divKernel runs the prelude's hk_div and hk_mod on the device.
const divKernel = `
extern "C" __global__ void hk_div_test(const double* a, const double* b, double* q,
                                       const long long* x, const long long* y, long long* r, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    q[i] = hk_div(a[i], b[i]);
    r[i] = hk_mod(x[i], y[i]);
  }
}
`

// TestGPUSoftDivisionMatchesGo runs hk_div and hk_mod on the device (the
// hardware's reciprocal estimate) over operands of every class and compares
// them bit for bit with Go's float64 division and int64 remainder.
func TestGPUSoftDivisionMatchesGo(t *testing.T) {
	lib := openLib(t)
	dev, err := lib.Device(0)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	src := allEventsModule(t, 64).Source + divKernel
	img, err := dev.Compile(src, cuda.CompileOptions{Name: "div.cu", WholeProgram: true})
	if err != nil {
		t.Fatal(err)
	}
	mod, err := dev.Load(img)
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Unload()
	fn, err := mod.Function("hk_div_test")
	if err != nil {
		t.Fatal(err)
	}
	const n = 1 << 20
	r := rand.New(rand.NewSource(7))
	pick := func() float64 {
		switch r.Intn(7) {
		case 0:
			return math.Float64frombits(r.Uint64())
		case 1:
			return math.Float64frombits(r.Uint64()&0x800fffffffffffff | uint64(1023+r.Intn(64)-32)<<52)
		case 2:
			return math.Float64frombits(r.Uint64()&0x800fffffffffffff | uint64(r.Intn(60))<<52)
		case 3:
			return math.Float64frombits(r.Uint64()&0x800fffffffffffff | uint64(2046-r.Intn(60))<<52)
		case 4:
			return float64(int64(r.Uint64()) >> r.Intn(64))
		case 5:
			return []float64{0, math.Copysign(0, -1), 1, 3, 1000, math.Inf(1), math.NaN(), 5e-324}[r.Intn(8)]
		}
		return math.Float64frombits(r.Uint64()&0x800fffffffffffff | 0x3ff0000000000000)
	}
	as, bs := make([]byte, 8*n), make([]byte, 8*n)
	xs, ys := make([]byte, 8*n), make([]byte, 8*n)
	for i := range n {
		binary.LittleEndian.PutUint64(as[8*i:], math.Float64bits(pick()))
		binary.LittleEndian.PutUint64(bs[8*i:], math.Float64bits(pick()))
		binary.LittleEndian.PutUint64(xs[8*i:], r.Uint64()>>r.Intn(64))
		binary.LittleEndian.PutUint64(ys[8*i:], uint64(int64(r.Uint64())>>r.Intn(64)))
	}
	var bufs [6]uint64
	for i := range bufs {
		if bufs[i], err = dev.Alloc(8 * n); err != nil {
			t.Fatal(err)
		}
		defer dev.Free(bufs[i])
	}
	for i, b := range [][]byte{as, bs, nil, xs, ys} {
		if b != nil {
			if err := dev.CopyHtoD(bufs[i], b, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := dev.Launch(fn, [3]uint32{1024, 1, 1}, [3]uint32{256, 1, 1}, 0, nil,
		bufs[0], bufs[1], bufs[2], bufs[3], bufs[4], bufs[5], int32(n)); err != nil {
		t.Fatal(err)
	}
	q, rem := make([]byte, 8*n), make([]byte, 8*n)
	if err := dev.CopyDtoH(q, bufs[2], nil); err != nil {
		t.Fatal(err)
	}
	if err := dev.CopyDtoH(rem, bufs[5], nil); err != nil {
		t.Fatal(err)
	}
	bad := 0
	for i := range n {
		a := math.Float64frombits(binary.LittleEndian.Uint64(as[8*i:]))
		b := math.Float64frombits(binary.LittleEndian.Uint64(bs[8*i:]))
		got := math.Float64frombits(binary.LittleEndian.Uint64(q[8*i:]))
		want := a / b
		if !(math.IsNaN(want) && math.IsNaN(got)) && math.Float64bits(want) != math.Float64bits(got) {
			if bad++; bad <= 5 {
				t.Errorf("hk_div(%x, %x) = %x, Go says %x", a, b, got, want)
			}
		}
		x, y := int64(binary.LittleEndian.Uint64(xs[8*i:])), int64(binary.LittleEndian.Uint64(ys[8*i:]))
		wm := int64(0)
		if y != 0 && y != -1 {
			wm = x % y
		}
		if gm := int64(binary.LittleEndian.Uint64(rem[8*i:])); gm != wm {
			if bad++; bad <= 5 {
				t.Errorf("hk_mod(%d, %d) = %d, Go says %d", x, y, gm, wm)
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d results differ from Go", bad, 2*n)
	}
	t.Logf("hk_div and hk_mod: %d operand pairs each, bit for bit as Go", n)
}
