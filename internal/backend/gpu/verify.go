package gpu

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/ncclhooks/ncclhooks/internal/config"
	"github.com/ncclhooks/ncclhooks/internal/cuda"
	"github.com/ncclhooks/ncclhooks/internal/hookgen"
)

// Why a hook can fault the kernel that calls it (measured on the H200,
// docs/ARCHITECTURE.md "Safe for every caller"): NCCL's kernel and the hook
// are linked separately, so nothing fits one to the other.
//   - Registers: a kernel is launched with its own register count; a callee
//     that uses more registers than its caller has executes an illegal
//     instruction. NCCL's kernels have 96 (DefaultRegisterBudget).
//   - Stack: the callee's frame lives below the caller's on a stack the
//     driver sized for the caller; with the caller's depth unknown, any frame
//     (spills, saved registers, locals) can run past its end.
//   - Calls: a call needs a stack frame (the return address and the
//     registers the ABI preserves).
//   - Addresses: code that the loader patches with an absolute address names
//     module data, which the hook must reach through devCtx instead.
// A hook that needs none of these is callable from any relocatable kernel
// with at least Resources.Registers registers.

// DefaultRegisterBudget is the register count of every NCCL kernel that calls
// the hook (cuobjdump -res-usage: all 40 ncclDevKernel_* of NCCL 2.28.9's
// sm_90 code use 96, NCCL builds them with -maxrregcount=96). A hook may use
// at most this many (NCCL_HOOKS_MAX_REGISTERS lowers or raises it).
const DefaultRegisterBudget = 96

// MinRegisterBudget is the fewest registers ptxas gives any function that
// follows the calling convention (its argument and return-address registers).
const MinRegisterBudget = 24

// registerCaps are the --maxrregcount values a hook module is compiled with,
// lowest first, up to the budget: the first build that is safe wins, so a
// hook uses no more registers than it needs (and works with more callers).
// Every step of 8 is tried because ptxas's choice between scratch registers
// and ones the calling convention makes it save (a stack frame) changes from
// cap to cap without a pattern (CUDA 11.8, sm_90: one profile's entry has a
// frame at every cap but 40, another at every cap but 56).
func registerCaps(budget int) []int {
	var caps []int
	for c := MinRegisterBudget; c < budget; c += 8 {
		caps = append(caps, c)
	}
	return append(caps, budget)
}

// Resources is what a linked hook module's entry asks of the kernel that
// calls it, read from the cubin the loader sees.
type Resources struct {
	Registers  int      // registers per thread (EIATTR_REGCOUNT)
	FrameBytes int      // stack frame (EIATTR_FRAME_SIZE): spills, saved registers, locals
	Calls      []string // functions the entry calls (compiler helpers)
	Addresses  []string // module symbols whose absolute address the loader writes into the entry's code
	// ReturnAddresses counts the distinct return addresses relocated into
	// the entry's code: one per call site, whether to a compiler helper
	// folded into the entry or through a pointer (the reload switch's).
	ReturnAddresses int
}

// subroutineCall is how Calls names a call whose callee kept no symbol.
const subroutineCall = "a subroutine (a compiler helper folded into the hook)"

func (r Resources) String() string {
	s := fmt.Sprintf("%d registers", r.Registers)
	if r.FrameBytes == 0 {
		s += ", no stack frame"
	} else {
		s += fmt.Sprintf(", a %d-byte stack frame", r.FrameBytes)
	}
	if len(r.Calls) == 0 {
		s += ", no calls"
	} else {
		s += ", calls " + strings.Join(r.Calls, ", ")
	}
	if len(r.Addresses) > 0 {
		s += ", addresses " + strings.Join(r.Addresses, ", ")
	}
	return s
}

// UnsafeError is a hook module that could fault the kernel calling it.
type UnsafeError struct {
	Resources Resources
	Budget    int // registers allowed
	Problems  []string
}

func (e *UnsafeError) Error() string { return strings.Join(e.Problems, "; ") }

// Check reports what, if anything, makes the entry unsafe to call from a
// kernel with budget registers.
func (r Resources) Check(budget int) error {
	var p []string
	if r.Registers > budget {
		p = append(p, fmt.Sprintf("needs %d registers, over the budget of %d (NCCL's kernels have %d; NCCL_HOOKS_MAX_REGISTERS sets the budget)",
			r.Registers, budget, DefaultRegisterBudget))
	}
	if r.FrameBytes > 0 {
		p = append(p, fmt.Sprintf("needs a %d-byte stack frame (a hook may have none: the stack it would grow into belongs to NCCL's kernel)", r.FrameBytes))
	}
	for _, c := range r.Calls {
		p = append(p, fmt.Sprintf("calls %s (a call needs a stack frame)", c))
	}
	for _, a := range r.Addresses {
		p = append(p, fmt.Sprintf("addresses the module symbol %s directly (the hook must reach its state through devCtx)", a))
	}
	if len(p) == 0 {
		return nil
	}
	return &UnsafeError{Resources: r, Budget: budget, Problems: p}
}

// Attribute codes of the cubin's .nv.info section (the values cuobjdump
// -elf prints as EIATTR_FRAME_SIZE and EIATTR_REGCOUNT).
const (
	eiattrFrameSize = 0x11
	eiattrRegCount  = 0x2f
	eifmtSVal       = 0x04 // attribute with a u16 size and a payload
)

// EntryResources reads the resources of ncclhooks_entry from a linked cubin:
// its symbols (the entry and the functions beside it), its .nv.info
// attributes (registers, frame) and its relocations (calls, addresses).
func EntryResources(cubin []byte) (Resources, error) {
	return FunctionResources(cubin, hookgen.SymEntry)
}

// FunctionResources reads the resources of function name from a linked
// cubin, as EntryResources does for the entry: every other function
// defined beside it counts as a call.
func FunctionResources(cubin []byte, name string) (Resources, error) {
	var r Resources
	f, err := openCubin(cubin)
	if err != nil {
		return r, err
	}
	syms, err := f.Symbols()
	if err != nil {
		return r, fmt.Errorf("reading the hook cubin's symbols: %w", err)
	}
	entry := -1 // symbol table index (Symbols omits index 0)
	for i, s := range syms {
		if elf.ST_TYPE(s.Info) != elf.STT_FUNC || s.Section == elf.SHN_UNDEF {
			continue
		}
		if s.Name == name {
			entry = i + 1
		} else {
			r.Calls = append(r.Calls, s.Name)
		}
	}
	if entry < 0 {
		return r, fmt.Errorf("the hook cubin has no function %s", name)
	}
	sort.Strings(r.Calls)
	if err := r.readInfo(f, entry, name); err != nil {
		return r, err
	}
	err = r.readRelocations(f, syms, name) // before r is returned: it adds to r
	return r, err
}

// openCubin opens a cubin as an ELF file.
func openCubin(cubin []byte) (*elf.File, error) {
	if len(cubin) < 0x18 {
		return nil, errors.New("reading the hook cubin: too short for an ELF file")
	}
	// A cubin keeps its CUDA ABI version where ELF keeps its own (e_ident and
	// e_version), which debug/elf refuses: read a copy that says version 1.
	img := append([]byte(nil), cubin...)
	img[elf.EI_VERSION] = byte(elf.EV_CURRENT)
	binary.LittleEndian.PutUint32(img[0x14:], uint32(elf.EV_CURRENT))
	f, err := elf.NewFile(bytes.NewReader(img))
	if err != nil {
		return nil, fmt.Errorf("reading the hook cubin: %w", err)
	}
	return f, nil
}

// readInfo reads the register count and frame size of the function at
// symbol index entry from the cubin's .nv.info section.
func (r *Resources) readInfo(f *elf.File, entry int, name string) error {
	info := f.Section(".nv.info")
	if info == nil {
		return errors.New("the hook cubin has no .nv.info section")
	}
	data, err := info.Data()
	if err != nil {
		return fmt.Errorf("reading .nv.info: %w", err)
	}
	regs := -1
	for p := 0; p+4 <= len(data); {
		format, attr := data[p], data[p+1]
		if format != eifmtSVal {
			p += 4 // the other formats carry at most a u16 in place
			continue
		}
		size := int(binary.LittleEndian.Uint16(data[p+2:]))
		payload := data[p+4 : min(p+4+size, len(data))]
		p += 4 + size
		if len(payload) < 8 || int(binary.LittleEndian.Uint32(payload)) != entry {
			continue
		}
		v := int(binary.LittleEndian.Uint32(payload[4:]))
		switch attr {
		case eiattrRegCount:
			regs = v
		case eiattrFrameSize:
			r.FrameBytes = v
		}
	}
	if regs < 0 {
		return fmt.Errorf("the hook cubin's .nv.info gives no register count for %s", name)
	}
	r.Registers = regs
	return nil
}

// readRelocations adds the calls and module addresses of the entry's
// relocations. After linking, a helper the compiler calls (its division slow
// path, say) is folded into the entry's own code and keeps no symbol; the
// call's return address is still relocated, against a function symbol (a
// low and a high half, with the same addend: the entry's own symbol plus
// the offset after the call). A call through a pointer relocates its
// return address the same way.
func (r *Resources) readRelocations(f *elf.File, syms []elf.Symbol, name string) error {
	rela := f.Section(".rela.text." + name)
	if rela == nil {
		return nil
	}
	data, err := rela.Data()
	if err != nil {
		return fmt.Errorf("reading the entry's relocations: %w", err)
	}
	type target struct {
		sym    int
		addend int64
	}
	returns := map[target]bool{}
	for p := 0; p+24 <= len(data); p += 24 { // Elf64_Rela
		sym := int(binary.LittleEndian.Uint64(data[p+8:]) >> 32)
		name := fmt.Sprintf("#%d", sym)
		if sym >= 1 && sym <= len(syms) {
			if elf.ST_TYPE(syms[sym-1].Info) == elf.STT_FUNC {
				r.Calls = appendNew(r.Calls, subroutineCall)
				returns[target{sym, int64(binary.LittleEndian.Uint64(data[p+16:]))}] = true
				continue
			}
			name = syms[sym-1].Name
		}
		r.Addresses = appendNew(r.Addresses, name)
	}
	r.ReturnAddresses = len(returns)
	return nil
}

func appendNew(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}

// HookCheck is one hook of a profile compiled on its own and checked.
type HookCheck struct {
	Hook      string
	Pos       config.Pos
	Resources Resources
	RegCap    int   // the --maxrregcount of the build that passed (or the last tried)
	Err       error // nil: safe to call from kernels with at least Resources.Registers registers
}

// Verify compiles every enabled hook of m's profile on its own for arch, as
// Compile would (lowest safe register cap first), and checks each build
// against opt.Budget: what ncclhooks validate reports. No device or context
// is needed, only NVRTC and nvJitLink.
func Verify(m *hookgen.Module, lib *cuda.Lib, arch string, opt Options) ([]HookCheck, error) {
	if err := opt.check(); err != nil {
		return nil, err
	}
	if !lib.HasJitLink() {
		return nil, errors.New("gpu backend: checking a hook needs nvJitLink to link it, and it was not found")
	}
	compile := func(src string, opt cuda.CompileOptions) (*cuda.Image, error) { return lib.Compile(arch, src, opt) }
	var out []HookCheck
	for _, h := range m.Profile.EnabledHooks() {
		one, err := hookgen.Generate(withHooks(m.Profile, func(x *config.Hook) bool { return x == h }))
		if err != nil {
			return nil, err
		}
		c := newCompiled(one, lib, opt)
		hc := HookCheck{Hook: h.Name, Pos: h.Pos}
		_, err = c.imagesFor(arch, compile)
		var u *unsafeBuild
		switch {
		case errors.As(err, &u):
			hc.Resources, hc.RegCap, hc.Err = u.res, opt.Budget, u.check
		case err != nil:
			return nil, err
		default:
			hc.Resources, hc.RegCap = c.Resources(arch)
		}
		out = append(out, hc)
	}
	return out, nil
}
