package abi

import (
	"bytes"
	"testing"
)

// FuzzDevEvent: any 24 bytes decode to an event that encodes back to the
// same bytes (the decoder reads every byte of the layout, and only those).
func FuzzDevEvent(f *testing.F) {
	f.Add(make([]byte, DevEventSize))
	f.Add(AppendDevEvent(nil, DevEvent{Timestamp: 1 << 62, WorkCounter: 7, FuncID: 611, ChannelID: 63, Phase: PhaseStop, Rsvd: 0xffff}))
	f.Add(bytes.Repeat([]byte{0xff}, DevEventSize+5))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < DevEventSize {
			return
		}
		e := DecodeDevEvent(b)
		if got := AppendDevEvent(nil, e); !bytes.Equal(got, b[:DevEventSize]) {
			t.Fatalf("%x decodes to %+v, which encodes to %x", b[:DevEventSize], e, got)
		}
	})
}
