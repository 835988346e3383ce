package gpuharness

import (
	"bytes"
	"debug/elf"
	"strings"
	"testing"

	"github.com/ncclhooks/ncclhooks/internal/cuda"
)

// TestEntryPointerForms compiles the ways a module can publish its entry
// address and checks that the resolver kernel gives an absolute address and
// that every variable form the driver finds agrees with it. The form
// entryResolvers uses must compile. (On the H200, CUDA 13.0, driver 580, no
// form of ncclhooks_entry_ptr was found by cuModuleGetGlobal in a directly
// loaded -rdc cubin, although its ELF symbol table names it; the log says.)
func TestEntryPointerForms(t *testing.T) {
	f := gpuFixture(t)
	for _, form := range []struct {
		name, decl  string
		mustCompile bool
	}{
		{"typed, C linkage (entryResolvers)", "extern \"C\" {\n__device__ ncclProfilerDevHook_t ncclhooks_entry_ptr = ncclhooks_entry;\n}", true},
		{"typed, C++ linkage", "__device__ ncclProfilerDevHook_t ncclhooks_entry_ptr = ncclhooks_entry;", false},
		{"void* cast, C linkage", "extern \"C\" __device__ void* ncclhooks_entry_ptr;\n__device__ void* ncclhooks_entry_ptr = (void*)ncclhooks_entry;", false},
		{"typed, used, C++ linkage", "__device__ __attribute__((used)) ncclProfilerDevHook_t ncclhooks_entry_ptr = ncclhooks_entry;", false},
	} {
		t.Run(form.name, func(t *testing.T) {
			src := eventDecl + "extern \"C\" __device__ void ncclhooks_entry(const ncclProfilerDevEvent_t* ev, void* ctx) {}\n" +
				form.decl + "\nextern \"C\" __global__ void ncclhooks_resolve(u64* out) { *out = (u64)ncclhooks_entry; }\n"
			img, err := f.dev.Compile(src, cuda.CompileOptions{Name: "form.cu"})
			if err != nil {
				if form.mustCompile {
					t.Fatalf("does not compile: %v", err)
				}
				t.Logf("does not compile: %v", err)
				return
			}
			t.Logf("cubin symbols: %s", entrySymbols(img.Cubin))
			mod, err := f.dev.Load(img)
			if err != nil {
				t.Fatal(err)
			}
			defer mod.Unload()
			viaKernel, err := runResolver(f.dev, mod)
			if err != nil {
				t.Fatal(err)
			}
			if viaKernel < 1<<32 {
				t.Errorf("resolver kernel gives %#x, a module-relative address", viaKernel)
			}
			viaVar, err := mod.ReadPointer(symEntryPtr)
			switch {
			case err != nil:
				t.Logf("%s: %v", symEntryPtr, err)
			case viaVar != viaKernel:
				t.Errorf("%s = %#x, resolver kernel %#x", symEntryPtr, viaVar, viaKernel)
			default:
				t.Logf("%s = resolver = %#x", symEntryPtr, viaVar)
			}
		})
	}
}

// entrySymbols lists the cubin's ELF symbols that name the entry.
func entrySymbols(cubin []byte) string {
	ef, err := elf.NewFile(bytes.NewReader(cubin))
	if err != nil {
		return "(not ELF: " + err.Error() + ")"
	}
	syms, err := ef.Symbols()
	if err != nil {
		return "(" + err.Error() + ")"
	}
	var names []string
	for _, s := range syms {
		if strings.Contains(s.Name, "entry") || strings.Contains(s.Name, "resolve") {
			names = append(names, s.Name)
		}
	}
	return strings.Join(names, " ")
}
