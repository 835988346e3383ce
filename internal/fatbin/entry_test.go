package fatbin

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"testing"
)

// A function with a .nv.info.<name> section whose symbol is not an entry
// (STO_CUDA_ENTRY clear) is a device function, not a kernel: CUDA 13 gives
// NCCL's table-called ncclDevFunc_* such sections, and cuobjdump -res-usage
// reports REG:0 for them. The fixture's fixture_r32, its entry bit cleared,
// must drop out; fixture_r64 stays.
func TestDeviceFunctionIsNotAKernel(t *testing.T) {
	cubin := append([]byte(nil), cubinOf(t)...)
	// debug/elf refuses the cubin's ABI version, as in parseCubin.
	img := append([]byte(nil), cubin...)
	img[elf.EI_VERSION] = byte(elf.EV_CURRENT)
	binary.LittleEndian.PutUint32(img[0x14:], uint32(elf.EV_CURRENT))
	f, err := elf.NewFile(bytes.NewReader(img))
	if err != nil {
		t.Fatal(err)
	}
	symtab := f.SectionByType(elf.SHT_SYMTAB)
	syms, err := f.Symbols()
	if err != nil || symtab == nil {
		t.Fatalf("symbols: %v", err)
	}
	cleared := false
	for i, s := range syms {
		if s.Name == "fixture_r32" {
			// Elf64_Sym is 24 bytes, st_other at 5; Symbols omits entry 0.
			off := int(symtab.Offset) + (i+1)*24 + 5
			if cubin[off]&stoCUDAEntry == 0 {
				t.Fatalf("fixture_r32 is not an entry in the fixture (st_other %#x)", cubin[off])
			}
			cubin[off] &^= stoCUDAEntry
			cleared = true
		}
	}
	if !cleared {
		t.Fatal("no symbol fixture_r32 in the fixture")
	}
	c, err := ParseCubin(cubin)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, k := range c.Kernels {
		names = append(names, k.Name)
	}
	if len(names) != 1 || names[0] != "fixture_r64" {
		t.Errorf("kernels %v, want [fixture_r64]: fixture_r32 is now a device function", names)
	}
}
