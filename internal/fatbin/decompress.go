package fatbin

import (
	"errors"
	"fmt"

	"github.com/klauspost/compress/zstd"
)

// decoder decompresses entry payloads; the zstd decoder is made on first
// use and released by close.
type decoder struct{ z *zstd.Decoder }

func (d *decoder) decompress(how string, src []byte, size int64) ([]byte, error) {
	if size < 0 || size > maxCubin {
		return nil, fmt.Errorf("%s payload of %d B decompressed: not a cubin", how, size)
	}
	switch how {
	case "lz4":
		dst := make([]byte, size)
		if err := lz4Block(dst, src); err != nil {
			return nil, fmt.Errorf("lz4: %w", err)
		}
		return dst, nil
	case "zstd":
		if d.z == nil {
			// One decoder serves every entry of the library: its cap is
			// maxCubin, not the first entry's size (torch's wheel: a later,
			// larger cubin failed with "window size exceeded").
			z, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(maxCubin))
			if err != nil {
				return nil, fmt.Errorf("zstd: %w", err)
			}
			d.z = z
		}
		dst, err := d.z.DecodeAll(src, make([]byte, 0, size))
		if err != nil {
			return nil, fmt.Errorf("zstd: %w", err)
		}
		if int64(len(dst)) != size {
			return nil, fmt.Errorf("zstd: %d B decompressed, the header says %d", len(dst), size)
		}
		return dst, nil
	}
	return nil, fmt.Errorf("unknown compression %q", how)
}

func (d *decoder) close() {
	if d.z != nil {
		d.z.Close()
	}
}

// maxCubin bounds a decompressed cubin (NCCL's linked cubin for one
// architecture is tens of MB) against a damaged header.
const maxCubin = 1 << 30

var errLZ4 = errors.New("corrupt block")

// lz4Block decompresses one LZ4 block (the format of lz4's
// LZ4_decompress_safe, which fatbinary's compression uses) into dst, which
// must come out exactly full. Each sequence is a token (literal length in
// its high nibble, match length - 4 in its low one, 15 meaning "add the
// following bytes up to one below 255"), the literals, a 2-byte offset back
// into the output and the match; the last sequence has literals only.
func lz4Block(dst, src []byte) error { return lz4Decode(dst, src, false) }

// lz4Prefix decompresses only the first len(dst) bytes of a block whose
// start is src.
func lz4Prefix(dst, src []byte) error { return lz4Decode(dst, src, true) }

// lz4Length adds to n the bytes of an LZ4 length extension at src[s:]
// (each 255 continues it) and returns n and the offset after it.
func lz4Length(src []byte, s, n int) (int, int, error) {
	for {
		if s >= len(src) {
			return 0, s, errLZ4
		}
		b := src[s]
		s++
		n += int(b)
		if b != 255 {
			return n, s, nil
		}
	}
}

func lz4Decode(dst, src []byte, prefix bool) error {
	s, d := 0, 0
	for s < len(src) && !(prefix && d == len(dst)) {
		tok := src[s]
		s++
		lit := int(tok >> 4)
		if lit == 15 {
			var err error
			if lit, s, err = lz4Length(src, s, lit); err != nil {
				return err
			}
		}
		if prefix {
			lit = min(lit, len(dst)-d, len(src)-s)
		}
		if lit > len(src)-s || lit > len(dst)-d {
			return fmt.Errorf("%w: %d literals at %d run past the end", errLZ4, lit, s)
		}
		d += copy(dst[d:], src[s:s+lit])
		s += lit
		if s == len(src) || (prefix && d == len(dst)) {
			break // the last sequence
		}
		if s+2 > len(src) {
			return errLZ4
		}
		off := int(src[s]) | int(src[s+1])<<8
		s += 2
		ml := int(tok&15) + 4
		if ml == 19 {
			var err error
			if ml, s, err = lz4Length(src, s, ml); err != nil {
				return err
			}
		}
		if prefix {
			ml = min(ml, len(dst)-d)
		}
		if off == 0 || off > d || ml > len(dst)-d {
			return fmt.Errorf("%w: match of %d at offset %d from %d", errLZ4, ml, off, d)
		}
		if off >= ml {
			d += copy(dst[d:d+ml], dst[d-off:d-off+ml])
		} else {
			for i := 0; i < ml; i++ { // overlapping: byte by byte
				dst[d] = dst[d-off]
				d++
			}
		}
	}
	if d != len(dst) {
		return fmt.Errorf("%w: %d B decompressed, the header says %d", errLZ4, d, len(dst))
	}
	return nil
}
