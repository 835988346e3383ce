package gpuharness

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	gpubackend "github.com/ncclhooks/ncclhooks/internal/backend/gpu"
)

// These tests need no GPU.

// hookKernels are the kernels of kernelSource that the harness launches with
// a hook: each must be allocated at least hookRegisters.
var hookKernels = []string{kernelHarness, kernelHookCost}

// registersPerSM is a multiprocessor's register file, sm_50 to sm_90.
const registersPerSM = 65536

// cudaKernel is one __global__ function of a CUDA source.
type cudaKernel struct{ name, params, body string }

var (
	lineCommentRE = regexp.MustCompile(`//[^\n]*`)
	kernelRE      = regexp.MustCompile(`__global__\s+void\s+(?:__launch_bounds__\([^)]*\)\s+)?(\w+)\s*\(`)
	// A call of the reservation in a kernel body (its definition starts
	// with "static __device__").
	reserveCallRE = regexp.MustCompile(`(?m)^\s*reserveHookRegisters\(([^,]*),[^;]*;[^\n]*\n`)
)

// cudaKernels splits src (comments removed) into its kernels.
func cudaKernels(src string) ([]cudaKernel, error) {
	src = lineCommentRE.ReplaceAllString(src, "")
	var out []cudaKernel
	for _, m := range kernelRE.FindAllStringSubmatchIndex(src, -1) {
		name := src[m[2]:m[3]]
		open := m[1] - 1
		end := matching(src, open, '(', ')')
		if end < 0 {
			return nil, fmt.Errorf("kernel %s: unbalanced parameter list", name)
		}
		lbrace := strings.IndexByte(src[end:], '{')
		if lbrace < 0 {
			return nil, fmt.Errorf("kernel %s: no body", name)
		}
		lbrace += end
		rbrace := matching(src, lbrace, '{', '}')
		if rbrace < 0 {
			return nil, fmt.Errorf("kernel %s: unbalanced body", name)
		}
		out = append(out, cudaKernel{name: name, params: src[open+1 : end], body: src[lbrace+1 : rbrace]})
	}
	return out, nil
}

// matching is the index of the bracket that closes the one at src[at], or -1.
func matching(src string, at int, open, close byte) int {
	depth := 0
	for i := at; i < len(src); i++ {
		switch src[i] {
		case open:
			depth++
		case close:
			if depth--; depth == 0 {
				return i
			}
		}
	}
	return -1
}

var constantGuardRE = regexp.MustCompile(`^\s*(?:true|false|\d+)\s*$`)

// checkReservation checks that src defines reserveHookRegisters once and that
// every kernel taking a hook calls it behind a guard that is not a constant;
// it returns the kernels that take a hook.
func checkReservation(src string) ([]string, error) {
	if n := strings.Count(src, "void reserveHookRegisters("); n != 1 {
		return nil, fmt.Errorf("reserveHookRegisters is defined %d times, want once", n)
	}
	ks, err := cudaKernels(src)
	if err != nil {
		return nil, err
	}
	var withHook []string
	var errs []string
	for _, k := range ks {
		if !strings.Contains(k.params, "ncclProfilerDevHook_t") {
			continue
		}
		withHook = append(withHook, k.name)
		calls := reserveCallRE.FindAllStringSubmatch(k.body, -1)
		if len(calls) == 0 {
			errs = append(errs, fmt.Sprintf("kernel %s takes a hook but does not call reserveHookRegisters: it may be allocated fewer registers than a hook the plugin accepts uses", k.name))
			continue
		}
		for _, c := range calls {
			if constantGuardRE.MatchString(c[1]) {
				errs = append(errs, fmt.Sprintf("kernel %s guards reserveHookRegisters with the constant %q: the compiler drops the branch; use a kernel argument the host validates", k.name, strings.TrimSpace(c[1])))
			}
		}
	}
	if len(errs) > 0 {
		return withHook, fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return withHook, nil
}

func TestHookKernelsCallTheReservation(t *testing.T) {
	got, err := checkReservation(kernelSource)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	want := slices.Sorted(slices.Values(hookKernels))
	if !slices.Equal(got, want) {
		t.Errorf("kernels taking a hook: %v; hookKernels (checked on the GPU by TestHookKernelsReserveTheBudget): %v", got, want)
	}

	// The check catches each kernel losing its call, and a constant guard.
	calls := reserveCallRE.FindAllStringIndex(kernelSource, -1)
	if len(calls) != len(hookKernels) {
		t.Fatalf("%d calls of reserveHookRegisters in kernelSource, want one per kernel taking a hook (%d)", len(calls), len(hookKernels))
	}
	for _, c := range calls {
		without := kernelSource[:c[0]] + "\n" + kernelSource[c[1]:]
		if _, err := checkReservation(without); err == nil || !strings.Contains(err.Error(), "does not call reserveHookRegisters") {
			t.Errorf("without %q: check = %v, want a kernel that does not call it", strings.TrimSpace(kernelSource[c[0]:c[1]]), err)
		}
	}
	constant := strings.Replace(kernelSource, "reserveHookRegisters(calls < 0,", "reserveHookRegisters(false,", 1)
	if constant == kernelSource {
		t.Fatal("the hook-cost kernel's reserveHookRegisters(calls < 0, ...) call was not found")
	}
	if _, err := checkReservation(constant); err == nil || !strings.Contains(err.Error(), `constant "false"`) {
		t.Errorf("a constant guard: check = %v, want it named", err)
	}
	if _, err := checkReservation(kernelSource + "\nstatic __device__ void reserveHookRegisters(bool, const u32*, u64*);\n"); err == nil {
		t.Error("a second reserveHookRegisters passed the check")
	}
}

func TestHookRegistersIsThePluginBudget(t *testing.T) {
	if hookRegisters != gpubackend.DefaultRegisterBudget {
		t.Errorf("the harness kernels reserve %d registers, the plugin accepts hooks up to %d (backend/gpu.DefaultRegisterBudget)", hookRegisters, gpubackend.DefaultRegisterBudget)
	}
	if !strings.Contains(kernelSource, "enum { HOOK_REGISTERS = "+strconv.Itoa(hookRegisters)+" };") {
		t.Errorf("kernelSource does not set HOOK_REGISTERS to %d", hookRegisters)
	}
}

var (
	ptxasEntryRE = regexp.MustCompile(`Compiling entry function '([^']+)'`)
	ptxasFuncRE  = regexp.MustCompile(`Function properties for (\S+)`)
	ptxasUsedRE  = regexp.MustCompile(`Used (\d+) registers`)
)

// kernelRegisters reads the register count of every kernel from ptxas -v
// output (as NVRTC returns it in its log).
func kernelRegisters(log string) map[string]int {
	regs := map[string]int{}
	cur := ""
	for _, line := range strings.Split(log, "\n") {
		if m := ptxasEntryRE.FindStringSubmatch(line); m != nil {
			cur = m[1]
			continue
		}
		if m := ptxasFuncRE.FindStringSubmatch(line); m != nil && m[1] != cur {
			cur = "" // a device function's properties, not the kernel's
			continue
		}
		if m := ptxasUsedRE.FindStringSubmatch(line); m != nil && cur != "" {
			if _, seen := regs[cur]; !seen {
				regs[cur], _ = strconv.Atoi(m[1])
			}
		}
	}
	return regs
}

func TestKernelRegistersReadsPtxasLog(t *testing.T) {
	// NVRTC 11.8's log of kernelSource (--ptxas-options=-v, sm_90), and a
	// newer ptxas's longer "Used" line and a device function's properties.
	log := `ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'ncclhooks_hook_cost' for 'sm_90'
ptxas info    : Function properties for ncclhooks_hook_cost
ptxas         .     24 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 104 registers
ptxas info    : Compiling entry function 'ncclhooks_harness_fill' for 'sm_90'
ptxas info    : Function properties for ncclhooks_harness_fill
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 12 registers
ptxas info    : Function properties for helper
ptxas info    : Used 30 registers
ptxas info    : Compiling entry function 'ncclhooks_harness' for 'sm_90'
ptxas info    : Function properties for ncclhooks_harness
ptxas         .     24 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 114 registers, used 0 barriers, 24 bytes cumulative stack size, 624 bytes cmem[0]
`
	got := kernelRegisters(log)
	want := map[string]int{kernelHookCost: 104, kernelFill: 12, kernelHarness: 114}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("kernelRegisters = %v, want %v", got, want)
	}
}

// The reference hooks are the floor the benchmarks compare against: a
// generic atomic in one of them (atomicAdd and friends on a generic pointer
// compile to an ATOM whose result predicate the thread waits for) would
// charge the reference a round trip per call. Their global-memory updates
// are spelled red.global, as the generated hooks' are.
func TestReferenceHooksMakeNoGenericAtomics(t *testing.T) {
	genericAtomic := regexp.MustCompile(`\batomic(Add|Sub|Exch|Min|Max|Inc|Dec|CAS|And|Or|Xor)\w*\s*\(`)
	for name, src := range map[string]string{"nop": nopHookSource, "counter": countingHookSource} {
		body := lineCommentRE.ReplaceAllString(src[len(eventDecl):], "")
		if m := genericAtomic.FindString(body); m != "" {
			t.Errorf("%s hook calls %s: spell the update red.global (fire and forget)", name, m)
		}
	}
	if !strings.Contains(countingHookSource, "red.global.add.u64") {
		t.Error("the counting hook no longer counts with red.global.add.u64")
	}
}
