package fatbin

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
)

// Magic opens every fat binary container.
const Magic = 0xBA55ED50

// Entry kinds and flags of the entry header.
const (
	KindPTX   = 1
	KindCubin = 2

	flagLZ4  = 0x2000 // nvcc -Xfatbin -compress-all (LZ4 block), nvcc <= 12.x
	flagZstd = 0x8000 // nvcc 12.8+ -compress-mode
	// flagOtherCompression is a compression flag seen in older toolkits'
	// headers whose payload format is not known here.
	flagOtherCompression = 0x1000
)

const (
	containerHeaderBytes = 16
	entryHeaderBytes     = 64
	// maxEntries bounds the walk over a damaged section (NCCL 2.30 for six
	// architectures has a few thousand entries).
	maxEntries = 1 << 20
)

// Entry is one entry of a container, as its header describes it.
type Entry struct {
	Kind  int    // KindPTX or KindCubin
	Arch  int    // SM architecture: 90 for sm_90
	Flags uint64 // header flags (compression among them)
	// Offset and Stored locate the payload in the section; Stored includes
	// padding. Compressed is the compressed payload's size (0: not
	// compressed), Size the payload's size once decompressed.
	Offset, Stored   int64
	Compressed, Size int64
}

// Compression names how the payload is stored: "" (plain), "lz4", "zstd",
// or "unknown".
func (e Entry) Compression() string {
	switch {
	case e.Flags&flagZstd != 0:
		return "zstd"
	case e.Flags&flagLZ4 != 0:
		return "lz4"
	case e.Flags&flagOtherCompression != 0:
		return "unknown"
	}
	return ""
}

// Container is one fat binary: the entries one registration with the CUDA
// runtime hands the driver, which picks one of them per device.
type Container struct {
	Offset  int64
	Entries []Entry
}

// Containers walks the fat binary containers of a .nv_fatbin section of size
// bytes, reading only their headers. Containers follow one another, each
// padded to 8 bytes.
func Containers(r io.ReaderAt, size int64) ([]Container, error) {
	var cs []Container
	var hdr [entryHeaderBytes]byte
	entries := 0
	for p := int64(0); p+containerHeaderBytes <= size; {
		if _, err := r.ReadAt(hdr[:containerHeaderBytes], p); err != nil {
			return cs, fmt.Errorf("container header at %#x: %w", p, err)
		}
		magic := binary.LittleEndian.Uint32(hdr[0:])
		if binary.LittleEndian.Uint64(hdr[0:]) == 0 {
			p += 8 // padding between containers
			continue
		}
		if magic != Magic {
			return cs, fmt.Errorf("no fat binary container at %#x (magic %#x, not %#x)", p, magic, Magic)
		}
		hsize := int64(binary.LittleEndian.Uint16(hdr[6:]))
		body := int64(binary.LittleEndian.Uint64(hdr[8:]))
		if hsize < containerHeaderBytes || body < 0 || body > size-p-hsize {
			return cs, fmt.Errorf("container at %#x: header %d B, body %d B past the section's %d B", p, hsize, body, size)
		}
		c := Container{Offset: p}
		end := p + hsize + body
		for q := p + hsize; q < end; {
			if entries++; entries > maxEntries {
				return cs, fmt.Errorf("more than %d entries: not a fat binary section", maxEntries)
			}
			if q+entryHeaderBytes > end {
				return cs, fmt.Errorf("entry at %#x: header runs past its container's end %#x", q, end)
			}
			if _, err := r.ReadAt(hdr[:], q); err != nil {
				return cs, fmt.Errorf("entry header at %#x: %w", q, err)
			}
			e, ehsize := parseEntry(hdr[:])
			if ehsize < entryHeaderBytes || e.Stored < 0 || e.Stored > end-q-ehsize || e.Compressed < 0 || e.Compressed > e.Stored {
				return cs, fmt.Errorf("entry at %#x: header %d B, payload %d B past its container's end %#x", q, ehsize, e.Stored, end)
			}
			e.Offset = q + ehsize
			c.Entries = append(c.Entries, e)
			q += ehsize + e.Stored
		}
		cs = append(cs, c)
		p = (end + 7) &^ 7
	}
	return cs, nil
}

// parseEntry decodes an entry header (nvcc 11.8-13.0):
//
//	u16 kind, u16 version, u32 header size, u64 payload size (padded),
//	u32 compressed size, u32 options offset, u16 minor, u16 major (of the
//	cubin format), u32 arch, u32 name offset, u32 name length, u64 flags,
//	u64 zero, u64 decompressed size
func parseEntry(h []byte) (Entry, int64) {
	e := Entry{
		Kind:   int(binary.LittleEndian.Uint16(h[0:])),
		Stored: int64(binary.LittleEndian.Uint64(h[8:])),
		Arch:   int(binary.LittleEndian.Uint32(h[28:])),
		Flags:  binary.LittleEndian.Uint64(h[40:]),
	}
	e.Size = e.Stored
	if e.Compression() != "" {
		e.Compressed = int64(binary.LittleEndian.Uint32(h[16:]))
		e.Size = int64(binary.LittleEndian.Uint64(h[56:]))
	}
	return e, int64(binary.LittleEndian.Uint32(h[4:]))
}

// Kernel is one kernel of a cubin and what it is launched with.
type Kernel struct {
	Name       string
	Arch       int
	Registers  int // per thread (EIATTR_REGCOUNT)
	FrameBytes int // its own stack frame (EIATTR_FRAME_SIZE)
	StackBytes int // its stack with the deepest call under it (EIATTR_MAX_STACK_SIZE, at least EIATTR_MIN_STACK_SIZE and its frame): cuobjdump -res-usage's STACK
	MaxThreads int // launch bound x*y*z (EIATTR_MAX_THREADS); 0: none given
}

// Library is what ReadLibrary found in a library's device code.
type Library struct {
	Path       string
	Arch       int // the architecture of the cubins read (90: sm_90)
	Kernels    []Kernel
	Containers int // fat binary containers in the section
	Cubins     int // cubins read (for Arch)
	// Relocatable counts the -rdc objects' cubins left unread beside the
	// linked ones.
	Relocatable int
	// PTXOnly counts containers that have no cubin for the device, only
	// PTX: the driver compiles those at load, and their kernels are not in
	// Kernels.
	PTXOnly int
}

// ErrNoFatbin is a library without a .nv_fatbin section: it carries no
// device code (or it was stripped).
var ErrNoFatbin = errors.New("no .nv_fatbin section")

// NoCubinError is a library whose device code has no cubin the device can
// load: the driver would compile PTX at load, with register counts nothing
// here can read.
type NoCubinError struct {
	Arch   int   // the device's, e.g. 90
	Cubins []int // the architectures it has cubins for
	PTX    []int // the architectures it has PTX for
}

func (e *NoCubinError) Error() string {
	s := fmt.Sprintf("no cubin for sm_%d", e.Arch)
	if len(e.Cubins) > 0 {
		s += " (cubins for " + archList(e.Cubins) + ")"
	}
	if len(e.PTX) > 0 {
		s += "; PTX for " + archList(e.PTX) + ", compiled by the driver at load"
	} else {
		s += "; no PTX"
	}
	return s
}

// CompressionError is a cubin stored in a way this package cannot read.
type CompressionError struct {
	Arch  int
	Flags uint64
}

func (e *CompressionError) Error() string {
	return fmt.Sprintf("the sm_%d cubins are compressed in a format not known here (entry flags %#x)", e.Arch, e.Flags)
}

// ReadLibrary reads the kernels of the library at path that a device of
// compute capability major.minor would load: per container, the cubin of the
// same major architecture with the highest minor not above the device's (the
// driver's choice). Only the section's headers and those cubins are read.
func ReadLibrary(path string, major, minor int) (*Library, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ef, err := elf.NewFile(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	sec := ef.Section(".nv_fatbin")
	if sec == nil || sec.Type == elf.SHT_NOBITS {
		return nil, ErrNoFatbin
	}
	lib, err := Read(io.NewSectionReader(f, int64(sec.Offset), int64(sec.Size)), int64(sec.Size), major, minor)
	if lib != nil {
		lib.Path = path
	}
	return lib, err
}

// Read reads a .nv_fatbin section of size bytes as ReadLibrary does.
func Read(r io.ReaderAt, size int64, major, minor int) (*Library, error) {
	cs, err := Containers(r, size)
	if err != nil {
		return nil, err
	}
	want := 10*major + minor
	lib := &Library{Containers: len(cs), Arch: want}
	var cubinArchs, ptxArchs []int
	var picks []Entry
	for _, c := range cs {
		best := -1
		ptx := false
		for i, e := range c.Entries {
			switch e.Kind {
			case KindCubin:
				cubinArchs = appendNew(cubinArchs, e.Arch)
				if e.Arch/10 == major && e.Arch%10 <= minor && (best < 0 || e.Arch > c.Entries[best].Arch) {
					best = i
				}
			case KindPTX:
				ptxArchs = appendNew(ptxArchs, e.Arch)
				ptx = ptx || e.Arch <= want
			}
		}
		switch {
		case best >= 0:
			picks = append(picks, c.Entries[best])
		case ptx:
			lib.PTXOnly++
		}
	}
	if len(picks) == 0 {
		sort.Ints(cubinArchs)
		sort.Ints(ptxArchs)
		return nil, &NoCubinError{Arch: want, Cubins: cubinArchs, PTX: ptxArchs}
	}
	// A library built with -rdc keeps each object's relocatable cubin beside
	// the one nvlink linked from them, which holds all their kernels and is
	// the one the driver loads: where a linked cubin is, the relocatable ones
	// (told by their ELF header, decompressed no further) are not read.
	read := make([]bool, len(picks))
	anyLinked := false
	for i, e := range picks {
		linked, known := peekLinked(r, e)
		read[i] = !known || linked
		anyLinked = anyLinked || (known && linked)
	}
	cubs := make([]*Cubin, len(picks))
	errs := make([]error, len(picks))
	next := make(chan int)
	var wg sync.WaitGroup
	// Decompression is most of the time (NCCL's cubins for one architecture
	// are tens of MB): one worker per core, up to 8.
	for range min(runtime.GOMAXPROCS(0), 8, len(picks)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var dec decoder
			defer dec.close()
			for i := range next {
				cubs[i], errs[i] = readCubin(r, picks[i], &dec)
			}
		}()
	}
	for i := range picks {
		if read[i] || !anyLinked {
			next <- i
		}
	}
	close(next)
	wg.Wait()
	exec := map[string]bool{} // kernels read from linked cubins
	byName := map[string]int{}
	for i, cub := range cubs {
		if errs[i] != nil {
			return nil, errs[i]
		}
		if cub == nil {
			lib.Relocatable++
			continue
		}
		lib.Cubins++
		lib.Arch = picks[i].Arch
		// Where a kernel is in several cubins, the linked one's counts win:
		// they include what nvlink added.
		for _, k := range cub.Kernels {
			k.Arch = picks[i].Arch
			j, seen := byName[k.Name]
			switch {
			case !seen:
				byName[k.Name] = len(lib.Kernels)
				lib.Kernels = append(lib.Kernels, k)
			case cub.Linked && !exec[k.Name]:
				lib.Kernels[j] = k
			default:
				continue
			}
			exec[k.Name] = cub.Linked
		}
	}
	return lib, nil
}

// peekLinked tells from e's ELF header whether it is a linked cubin (known:
// false where the header could not be read without decompressing it all).
func peekLinked(r io.ReaderAt, e Entry) (linked, known bool) {
	const hdr = 18 // e_ident, e_type
	var h [hdr]byte
	switch e.Compression() {
	case "":
		if e.Size < hdr {
			return false, false
		}
		if _, err := r.ReadAt(h[:], e.Offset); err != nil {
			return false, false
		}
	case "lz4":
		// The first sequence or two hold the header: a few hundred bytes.
		src := make([]byte, min(e.Compressed, 256))
		if _, err := r.ReadAt(src, e.Offset); err != nil || lz4Prefix(h[:], src) != nil {
			return false, false
		}
	default:
		return false, false
	}
	if string(h[:4]) != elf.ELFMAG {
		return false, false
	}
	t := elf.Type(binary.LittleEndian.Uint16(h[16:]))
	return t == elf.ET_EXEC || t == elf.ET_DYN, true
}

// readCubin reads and parses the cubin of entry e.
func readCubin(r io.ReaderAt, e Entry, dec *decoder) (*Cubin, error) {
	var data []byte
	var err error
	switch e.Compression() {
	case "":
		data = make([]byte, e.Size)
		_, err = r.ReadAt(data, e.Offset)
	case "lz4", "zstd":
		src := make([]byte, e.Compressed)
		if _, err = r.ReadAt(src, e.Offset); err == nil {
			data, err = dec.decompress(e.Compression(), src, e.Size)
		}
	default:
		return nil, &CompressionError{Arch: e.Arch, Flags: e.Flags}
	}
	if err != nil {
		return nil, fmt.Errorf("sm_%d cubin at %#x: %w", e.Arch, e.Offset, err)
	}
	cub, err := parseCubin(data)
	if err != nil {
		return nil, fmt.Errorf("sm_%d cubin at %#x: %w", e.Arch, e.Offset, err)
	}
	return cub, nil
}

func appendNew(xs []int, x int) []int {
	for _, y := range xs {
		if y == x {
			return xs
		}
	}
	return append(xs, x)
}

func archList(archs []int) string {
	var s []string
	for _, a := range archs {
		s = append(s, fmt.Sprintf("sm_%d", a))
	}
	return strings.Join(s, ", ")
}
