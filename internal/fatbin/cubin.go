package fatbin

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

// Attribute codes of .nv.info sections (the names cuobjdump -elf prints).
const (
	eiattrMaxThreads   = 0x05 // .nv.info.<kernel>: u32 x, y, z
	eiattrFrameSize    = 0x11 // .nv.info: u32 symbol, u32 bytes
	eiattrMinStackSize = 0x12 // .nv.info: u32 symbol, u32 bytes
	eiattrMaxStackSize = 0x23 // .nv.info: u32 symbol, u32 bytes
	eiattrRegCount     = 0x2f // .nv.info: u32 symbol, u32 registers
	// stoCUDAEntry marks a kernel's symbol (st_other), as cuobjdump -elf's STO_ENTRY.
	stoCUDAEntry = 0x10

	// Every attribute is at least 4 bytes: format, attribute, and a u16
	// that is unused (NVAL), the value (BVAL, HVAL) or the payload's size.
	eifmtNVal = 0x01 // no value
	eifmtBVal = 0x02 // u8 value in place
	eifmtHVal = 0x03 // u16 value in place
	eifmtSVal = 0x04 // u16 size, then that many bytes
)

// Cubin is what ParseCubin read from one cubin.
type Cubin struct {
	// Linked: an executable cubin (nvlink's output, or whole-program
	// code), as the driver loads it; false for a relocatable object's.
	Linked  bool
	Kernels []Kernel
}

// ParseCubin reads every kernel of a cubin: a function with a
// .nv.info.<name> section whose symbol is an entry (STO_CUDA_ENTRY).
func ParseCubin(data []byte) (*Cubin, error) {
	if len(data) < 0x40 {
		return nil, errors.New("not an ELF cubin")
	}
	return parseCubin(append([]byte(nil), data...))
}

// parseCubin is ParseCubin on a cubin it may change.
func parseCubin(img []byte) (*Cubin, error) {
	if len(img) < 0x40 || !bytes.HasPrefix(img, []byte(elf.ELFMAG)) {
		return nil, errors.New("not an ELF cubin")
	}
	// A cubin keeps its CUDA ABI version where ELF keeps its own (e_ident
	// and e_version), which debug/elf refuses: say 1.
	img[elf.EI_VERSION] = byte(elf.EV_CURRENT)
	binary.LittleEndian.PutUint32(img[0x14:], uint32(elf.EV_CURRENT))
	f, err := elf.NewFile(bytes.NewReader(img))
	if err != nil {
		return nil, fmt.Errorf("cubin: %w", err)
	}
	c := &Cubin{Linked: f.Type == elf.ET_EXEC || f.Type == elf.ET_DYN}
	syms, err := f.Symbols()
	if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
		return nil, fmt.Errorf("cubin symbols: %w", err)
	}
	symIndex := map[string]int{} // symbol table index (Symbols omits index 0)
	entry := map[string]bool{}   // kernels: STO_CUDA_ENTRY in st_other
	for i, s := range syms {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC {
			symIndex[s.Name] = i + 1
			if s.Other&stoCUDAEntry != 0 {
				entry[s.Name] = true
			}
		}
	}
	// Per symbol index, from the cubin's .nv.info.
	regs, frames, stacks := map[int]int{}, map[int]int{}, map[int]int{}
	if s := f.Section(".nv.info"); s != nil {
		data, err := s.Data()
		if err != nil {
			return nil, fmt.Errorf("cubin .nv.info: %w", err)
		}
		err = attributes(data, func(attr byte, v []byte) {
			if len(v) < 8 {
				return
			}
			sym, n := int(binary.LittleEndian.Uint32(v)), int(binary.LittleEndian.Uint32(v[4:]))
			switch attr {
			case eiattrRegCount:
				regs[sym] = n
			case eiattrFrameSize:
				frames[sym] = n
			case eiattrMaxStackSize, eiattrMinStackSize:
				// MAX is 0 where nvlink did not compute it (cuobjdump's
				// STACK is then MIN, the frame): take the larger.
				stacks[sym] = max(stacks[sym], n)
			}
		})
		if err != nil {
			return nil, fmt.Errorf("cubin .nv.info: %w", err)
		}
	}
	for _, s := range f.Sections {
		name, ok := strings.CutPrefix(s.Name, ".nv.info.")
		if !ok {
			continue
		}
		// CUDA 13 gives the device functions that NCCL calls through its
		// function table a .nv.info.<name> too; they are not launched, and
		// cuobjdump -res-usage says REG:0 for them. A cubin whose symbols
		// mark no entry (none seen) keeps every function, as before.
		if len(entry) > 0 && !entry[name] {
			continue
		}
		k := Kernel{Name: name, Registers: -1}
		data, err := s.Data()
		if err != nil {
			return nil, fmt.Errorf("cubin %s: %w", s.Name, err)
		}
		err = attributes(data, func(attr byte, v []byte) {
			if attr == eiattrMaxThreads && len(v) >= 12 {
				k.MaxThreads = int(binary.LittleEndian.Uint32(v)) * int(binary.LittleEndian.Uint32(v[4:])) * int(binary.LittleEndian.Uint32(v[8:]))
			}
		})
		if err != nil {
			return nil, fmt.Errorf("cubin %s: %w", s.Name, err)
		}
		if i, ok := symIndex[name]; ok {
			if n, ok := regs[i]; ok {
				k.Registers = n
			}
			k.FrameBytes = frames[i]
			k.StackBytes = max(k.FrameBytes, stacks[i])
		}
		if k.Registers < 0 {
			// Older cubins give the count only in the kernel's code
			// section: the top byte of its sh_info.
			if t := f.Section(".text." + name); t != nil && t.Info>>24 != 0 {
				k.Registers = int(t.Info >> 24)
			}
		}
		if k.Registers < 0 {
			return nil, fmt.Errorf("cubin: no register count for kernel %s", name)
		}
		c.Kernels = append(c.Kernels, k)
	}
	return c, nil
}

// attributes calls fn with every attribute of a .nv.info section and its
// value (an SVAL's payload, or an HVAL's or BVAL's value bytes).
func attributes(data []byte, fn func(attr byte, v []byte)) error {
	for p := 0; p < len(data); {
		if p+4 > len(data) {
			return fmt.Errorf("attribute at %#x cut short", p)
		}
		format, attr := data[p], data[p+1]
		switch format {
		case eifmtNVal:
			p += 4
		case eifmtBVal, eifmtHVal:
			fn(attr, data[p+2:p+4])
			p += 4
		case eifmtSVal:
			n := int(binary.LittleEndian.Uint16(data[p+2:]))
			if p+4+n > len(data) {
				return fmt.Errorf("attribute %#x at %#x: %d B past the section's end", attr, p, n)
			}
			fn(attr, data[p+4:p+4+n])
			p += 4 + n
		default:
			return fmt.Errorf("attribute at %#x has unknown format %#x", p, format)
		}
	}
	return nil
}
