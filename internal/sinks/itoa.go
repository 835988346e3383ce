package sinks

// Decimal integers for the record lines, the sink's hot path: the same
// bytes as strconv.AppendUint and AppendInt in base 10, written straight
// into the line (no scratch array copied after) eight digits per store.

import (
	"encoding/binary"
	"math/bits"
	"slices"
)

// intRoom is the room putUint and putInt need at buf[i:]: 20 digits (or a
// sign and 19) plus the 7 bytes past the number that a short number's one
// 8-byte store may scribble on.
const intRoom = 28

// putUint writes v in decimal at buf[i:], which must have intRoom bytes,
// and returns the index after its last digit. Bytes after it may be
// overwritten.
func putUint(buf []byte, i int, v uint64) int {
	if v < 10 { // ids, channels, phases: inlined where called
		buf[i] = byte('0' + v)
		return i + 1
	}
	return putUint10(buf, i, v)
}

// putUint10 is putUint for v >= 10.
func putUint10(buf []byte, i int, v uint64) int {
	if v < 1e8 {
		return putUpTo8(buf, i, uint32(v))
	}
	hi, lo := v/1e8, uint32(v%1e8)
	if hi < 1e8 {
		i = putUpTo8(buf, i, uint32(hi))
	} else { // 17 to 20 digits: nanosecond timestamps
		i = putUpTo8(buf, i, uint32(hi/1e8))
		binary.LittleEndian.PutUint64(buf[i:], eightDigits(uint32(hi%1e8)))
		i += 8
	}
	binary.LittleEndian.PutUint64(buf[i:], eightDigits(lo))
	return i + 8
}

// putInt is putUint for a signed value.
func putInt(buf []byte, i int, v int64) int {
	if v < 0 {
		buf[i] = '-'
		return putUint(buf, i+1, -uint64(v))
	}
	return putUint(buf, i, uint64(v))
}

// putUpTo8 writes v < 1e8 at buf[i:] (8 bytes of room) and returns the
// index after its last digit.
func putUpTo8(buf []byte, i int, v uint32) int {
	if v < 1e4 { // counters and positions of a short run: pairs of digits from a table
		if v >= 100 {
			hi := v / 100
			v -= hi * 100
			if hi >= 10 {
				buf[i] = digitPairs[2*hi]
				i++
			}
			buf[i] = digitPairs[2*hi+1]
			i++
		} else if v < 10 {
			buf[i] = byte('0' + v)
			return i + 1
		}
		buf[i], buf[i+1] = digitPairs[2*v], digitPairs[2*v+1]
		return i + 2
	}
	// bits*1233>>12 (log10(2) ~ 1233/4096) is the digit count or one less.
	n := bits.Len32(v) * 1233 >> 12
	if v >= pow10[n] {
		n++
	}
	// The eight digits with leading zeros, shifted so that the number's
	// first digit comes first: the bytes past it are zeros.
	binary.LittleEndian.PutUint64(buf[i:], eightDigits(v)>>(64-8*n))
	return i + n
}

// highDigits are the digits above the last eight of the last value of one
// field that had more than eight: those of a nanosecond timestamp change
// once in 0.1 s, so the records of a run share them and they are formatted
// once.
type highDigits struct {
	hi     uint64 // value / 1e8 (0: none yet)
	w0, w1 uint64 // its digits, up to 12, little endian
	n      int
}

// put is putUint(buf, i, v) for v >= 1e8.
func (h *highDigits) put(buf []byte, i int, v uint64) int {
	le := binary.LittleEndian
	hi, lo := v/1e8, uint32(v%1e8)
	if hi != h.hi {
		var d [16 + intRoom]byte
		h.hi, h.n = hi, putUint(d[:], 0, hi)
		h.w0, h.w1 = le.Uint64(d[:]), le.Uint64(d[8:])
	}
	le.PutUint64(buf[i:], h.w0) // 16 bytes, within the room of 12 digits and 8
	le.PutUint64(buf[i+8:], h.w1)
	i += h.n
	le.PutUint64(buf[i:], eightDigits(lo))
	return i + 8
}

// digitPairs is "00" to "99".
const digitPairs = "00010203040506070809" +
	"10111213141516171819" +
	"20212223242526272829" +
	"30313233343536373839" +
	"40414243444546474849" +
	"50515253545556575859" +
	"60616263646566676869" +
	"70717273747576777879" +
	"80818283848586878889" +
	"90919293949596979899"

// pow10 is 10^0 .. 10^8 for putUpTo8's digit count.
var pow10 = [9]uint32{1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8}

// eightDigits returns v < 1e8 as eight ASCII digits with leading zeros, the
// first digit in the lowest byte (their order in memory when stored little
// endian). It splits v into lanes of one 64-bit word, halving each lane's
// width while dividing it by 10^4, 10^2 and 10 together, so the digits take
// a few multiplications instead of a division each; each lane's product
// stays within its lane.
func eightDigits(v uint32) uint64 {
	x := uint64(v/10000) | uint64(v%10000)<<32 // 2 lanes of 32 bits, < 10^4
	q := x * 10486 >> 20 & 0x0000007f_0000007f // lane / 100 (exact below 10^4)
	x = q | (x-q*100)<<16                      // 4 lanes of 16 bits, < 100
	q = x * 103 >> 10 & 0x000f_000f_000f_000f  // lane / 10 (exact below 100)
	x = q | (x-q*10)<<8                        // 8 lanes of 8 bits, < 10
	return x + 0x30303030_30303030             // '0'
}

// appendUint is strconv.AppendUint(b, v, 10).
func appendUint(b []byte, v uint64) []byte {
	b = slices.Grow(b, intRoom)
	return b[:putUint(b[:cap(b)], len(b), v)]
}

// appendInt is strconv.AppendInt(b, v, 10).
func appendInt(b []byte, v int64) []byte {
	b = slices.Grow(b, intRoom)
	return b[:putInt(b[:cap(b)], len(b), v)]
}
