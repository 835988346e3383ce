package hookgen

import (
	"testing"

	"github.com/ncclhooks/ncclhooks/internal/config"
)

// allEventsLayout is an all-events record's layout (five fields, 24 bytes).
func allEventsLayout() *Layout {
	l := &Layout{}
	for _, t := range []config.Type{config.U64, config.U64, config.U32, config.U8, config.U8} {
		l.Fields = append(l.Fields, FieldLayout{Name: "x", Type: t, Offset: l.Bytes})
		l.Bytes += t.Bytes()
	}
	return l
}

// BenchmarkDecodeAllEvents is Layout.Decode of an all-events record.
func BenchmarkDecodeAllEvents(b *testing.B) {
	l := allEventsLayout()
	payload := make([]byte, 24)
	out := make([]Value, 0, 5)
	for i := 0; i < b.N; i++ {
		out = l.Decode(payload, out)
	}
}

// BenchmarkDecoderAllEvents is the same through a Decoder, as the drain does it.
func BenchmarkDecoderAllEvents(b *testing.B) {
	d := allEventsLayout().NewDecoder()
	payload := make([]byte, 24)
	out := d.Values(1)
	for i := 0; i < b.N; i++ {
		d.Decode(payload, out)
	}
}

// BenchmarkDecodeBatch is DecodeBatch of the drain's batches of all-events
// records (1024 records of 24 bytes); an op is one record.
func BenchmarkDecodeBatch(b *testing.B) {
	const batch = 1024
	d := allEventsLayout().NewDecoder()
	payloads := make([]byte, batch*24)
	vals := d.Values(batch)
	seqs := make([]uint64, batch)
	for done := 0; done < b.N; done += batch {
		d.DecodeBatch(payloads, 24, seqs[:min(batch, b.N-done)], vals)
	}
}

// BenchmarkDecoderRecords is Decode record by record over the same batches,
// as the drain decoded before DecodeBatch; an op is one record.
func BenchmarkDecoderRecords(b *testing.B) {
	const batch = 1024
	d := allEventsLayout().NewDecoder()
	payloads := make([]byte, batch*24)
	vals := d.Values(batch)
	for done := 0; done < b.N; done += batch {
		for i := range min(batch, b.N-done) {
			d.Decode(payloads[i*24:(i+1)*24], vals[i*5:(i+1)*5])
		}
	}
}
