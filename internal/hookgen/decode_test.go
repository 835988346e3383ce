package hookgen

import (
	"math"
	"math/rand"
	"testing"

	"github.com/ncclhooks/ncclhooks/internal/config"
)

// The drain's Decoder decodes every type exactly as Layout.Decode does:
// sign extension, floats, and fields at every offset of a packed payload.
func TestDecoderMatchesDecode(t *testing.T) {
	types := []config.Type{config.Bool, config.U8, config.I8, config.U16, config.I16, config.U32, config.I32,
		config.F32, config.U64, config.I64, config.F64}
	l := Layout{}
	for _, ty := range types {
		l.Fields = append(l.Fields, FieldLayout{Name: string(ty), Type: ty, Offset: l.Bytes})
		l.Bytes += ty.Bytes()
	}
	l.Chunks = (l.Bytes + 3) / 4
	l.Prepare()
	dec := l.NewDecoder()
	vals := dec.Values(3)
	r := rand.New(rand.NewSource(1))
	payload := make([]byte, 4*l.Chunks)
	for round := 0; round < 2000; round++ {
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
		rec := vals[(round%3)*len(types) : (round%3+1)*len(types)]
		dec.Decode(payload, rec)
		want := l.Decode(payload, nil)
		for i := range want {
			g, w := rec[i], want[i]
			same := g.Type == w.Type && g.U == w.U && g.I == w.I &&
				(g.F == w.F || (math.IsNaN(g.F) && math.IsNaN(w.F)))
			if !same {
				t.Fatalf("round %d field %s: decoder %+v, Decode %+v", round, types[i], g, w)
			}
		}
	}
}
