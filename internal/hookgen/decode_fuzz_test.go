package hookgen

import (
	"math"
	"testing"

	"github.com/ncclhooks/ncclhooks/internal/config"
)

var fuzzTypes = []config.Type{config.U8, config.U16, config.U32, config.U64, config.I8, config.I16, config.I32, config.I64, config.F32, config.F64}

// FuzzDecoder: the record decoder the drain runs (Decoder.Decode and
// DecodeBatch) against the reference (wantValue) for a layout of any field
// types, packed as hookgen packs them, and any payload bytes.
func FuzzDecoder(f *testing.F) {
	f.Add([]byte{3, 3, 2, 0, 0}, []byte("0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdef"), uint8(2))
	f.Add([]byte{9, 8, 7, 6, 5, 4}, make([]byte, 64), uint8(1))
	f.Add([]byte{0}, []byte{0xff, 0xff, 0xff, 0xff}, uint8(3))
	f.Fuzz(func(t *testing.T, spec, data []byte, n uint8) {
		if len(spec) == 0 || len(spec) > 32 {
			return
		}
		l := Layout{}
		for _, b := range spec {
			ty := fuzzTypes[int(b)%len(fuzzTypes)]
			sz := ty.Bytes()
			l.Bytes = (l.Bytes + sz - 1) / sz * sz // natural alignment
			l.Fields = append(l.Fields, FieldLayout{Name: "f", Type: ty, Offset: l.Bytes})
			l.Bytes += sz
		}
		l.Chunks = (l.Bytes + 3) / 4
		stride := 4 * l.Chunks
		recs := int(n%8) + 1
		payloads := make([]byte, (recs-1)*stride+l.Bytes)
		copy(payloads, data)
		same := func(g, w Value) bool {
			return g.Type == w.Type && g.U == w.U && g.I == w.I && (g.F == w.F || (math.IsNaN(g.F) && math.IsNaN(w.F)))
		}
		dec := l.NewDecoder()
		one := dec.Values(1)
		dec.Decode(payloads[:l.Bytes], one)
		for i, fl := range l.Fields {
			if w := wantValue(fl, payloads); !same(one[i], w) {
				t.Fatalf("layout %v field %d: Decode %+v, want %+v", spec, i, one[i], w)
			}
		}
		vals := dec.Values(recs)
		dec.DecodeBatch(payloads, stride, make([]uint64, recs), vals)
		for r := range recs {
			for i, fl := range l.Fields {
				if w := wantValue(fl, payloads[r*stride:]); !same(vals[r*len(l.Fields)+i], w) {
					t.Fatalf("layout %v record %d field %d: DecodeBatch %+v, want %+v", spec, r, i, vals[r*len(l.Fields)+i], w)
				}
			}
		}
	})
}
