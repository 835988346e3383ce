package hookgen

import (
	"testing"

	"github.com/ncclhooks/ncclhooks/internal/config"
)

// BenchmarkDecodeAllEvents is the drain's per-record decode of an
// all-events record (five fields).
func BenchmarkDecodeAllEvents(b *testing.B) {
	l := Layout{}
	for _, t := range []config.Type{config.U64, config.U64, config.U32, config.U8, config.U8} {
		l.Fields = append(l.Fields, FieldLayout{Name: "x", Type: t, Offset: l.Bytes})
		l.Bytes += t.Bytes()
	}
	l.Prepare()
	payload := make([]byte, 24)
	out := make([]Value, 0, 5)
	for i := 0; i < b.N; i++ {
		out = l.Decode(payload, out)
	}
}

// BenchmarkDecoderAllEvents is the same through a Decoder, as the drain does it.
func BenchmarkDecoderAllEvents(b *testing.B) {
	l := Layout{}
	for _, t := range []config.Type{config.U64, config.U64, config.U32, config.U8, config.U8} {
		l.Fields = append(l.Fields, FieldLayout{Name: "x", Type: t, Offset: l.Bytes})
		l.Bytes += t.Bytes()
	}
	l.Prepare()
	payload := make([]byte, 24)
	d := l.NewDecoder()
	out := d.Values(1)
	for i := 0; i < b.N; i++ {
		d.Decode(payload, out)
	}
}
