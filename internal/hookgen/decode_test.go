package hookgen

import (
	"encoding/binary"
	"math"
	"math/rand"
	"testing"

	"github.com/ncclhooks/ncclhooks/internal/config"
)

// wantValue decodes one field the plain way, type by type: the reference
// both decoders are checked against.
func wantValue(f FieldLayout, payload []byte) Value {
	le, b := binary.LittleEndian, payload[f.Offset:]
	v := Value{Type: f.Type}
	switch f.Type {
	case config.Bool, config.U8:
		v.U = uint64(b[0])
	case config.U16:
		v.U = uint64(le.Uint16(b))
	case config.U32:
		v.U = uint64(le.Uint32(b))
	case config.U64:
		v.U = le.Uint64(b)
	case config.I8:
		v.I = int64(int8(b[0]))
	case config.I16:
		v.I = int64(int16(le.Uint16(b)))
	case config.I32:
		v.I = int64(int32(le.Uint32(b)))
	case config.I64:
		v.I = int64(le.Uint64(b))
	case config.F32:
		v.F = float64(math.Float32frombits(le.Uint32(b)))
	case config.F64:
		v.F = math.Float64frombits(le.Uint64(b))
	}
	return v
}

// The drain's Decoder and Layout.Decode decode every type as the plain
// type-by-type reading does: sign extension, floats, and fields at every
// offset of a packed payload, in its last 8 bytes, and in payloads shorter
// than 8 bytes.
func TestDecodersMatchTheReference(t *testing.T) {
	types := []config.Type{config.Bool, config.U8, config.I8, config.U16, config.I16, config.U32, config.I32,
		config.F32, config.U64, config.I64, config.F64}
	layouts := [][]config.Type{types, {config.U64, config.I8}, {config.I8, config.U16, config.I32}}
	for _, ty := range types {
		layouts = append(layouts, []config.Type{ty})
	}
	for _, tys := range layouts {
		l := Layout{}
		for _, ty := range tys {
			l.Fields = append(l.Fields, FieldLayout{Name: string(ty), Type: ty, Offset: l.Bytes})
			l.Bytes += ty.Bytes()
		}
		l.Chunks = (l.Bytes + 3) / 4
		checkDecoders(t, l)
		checkBatch(t, l)
	}
}

// checkBatch checks DecodeBatch against the reference on batches of random
// records, back to back at the drain's stride and at a wider one, the last
// record ending at the end of the buffer.
func checkBatch(t *testing.T, l Layout) {
	t.Helper()
	nf := len(l.Fields)
	dec := l.NewDecoder()
	r := rand.New(rand.NewSource(2))
	for _, stride := range []int{4 * l.Chunks, 4*l.Chunks + 12} {
		for _, n := range []int{1, 2, 7, 300} {
			payloads := make([]byte, (n-1)*stride+l.Bytes)
			for i := range payloads {
				payloads[i] = byte(r.Intn(256))
			}
			vals := dec.Values(n)
			dec.DecodeBatch(payloads, stride, make([]uint64, n), vals)
			for i := range n {
				for f, fl := range l.Fields {
					g, w := vals[i*nf+f], wantValue(fl, payloads[i*stride:])
					if g.Type != w.Type || g.U != w.U || g.I != w.I || (g.F != w.F && !(math.IsNaN(g.F) && math.IsNaN(w.F))) {
						t.Fatalf("%d-byte layout, stride %d, record %d of %d, field %d (%s): %+v, want %+v", l.Bytes, stride, i, n, f, fl.Type, g, w)
					}
				}
			}
		}
	}
}

func checkDecoders(t *testing.T, l Layout) {
	t.Helper()
	nf := len(l.Fields)
	dec := l.NewDecoder()
	vals := dec.Values(3)
	r := rand.New(rand.NewSource(1))
	same := func(g, w Value) bool {
		return g.Type == w.Type && g.U == w.U && g.I == w.I && (g.F == w.F || (math.IsNaN(g.F) && math.IsNaN(w.F)))
	}
	for round := 0; round < 2000; round++ {
		// The drain's payloads are whole chunks, Layout.Decode's may be
		// exactly the layout's bytes.
		payload := make([]byte, 4*l.Chunks)
		if round%2 == 1 {
			payload = payload[:l.Bytes]
		}
		for i := range payload {
			switch round % 3 {
			case 0:
				payload[i] = byte(r.Intn(256))
			case 1:
				payload[i] = 0xff // every signed field negative
			default:
				payload[i] = 0x7f
			}
		}
		rec := vals[(round%3)*nf : (round%3+1)*nf]
		dec.Decode(payload, rec)
		plain := l.Decode(payload, nil)
		for i, f := range l.Fields {
			want := wantValue(f, payload)
			if !same(rec[i], want) {
				t.Fatalf("%d bytes, round %d, field %d (%s): Decoder %+v, want %+v", l.Bytes, round, i, f.Type, rec[i], want)
			}
			if !same(plain[i], want) {
				t.Fatalf("%d bytes, round %d, field %d (%s): Layout.Decode %+v, want %+v", l.Bytes, round, i, f.Type, plain[i], want)
			}
		}
	}
}
