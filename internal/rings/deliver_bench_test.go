package rings

import (
	"testing"
	"time"

	"github.com/ncclhooks/ncclhooks/internal/config"
)

// BenchmarkDeliver measures the deliverer alone (an op is one record): a
// ring of all-events-shaped records decoded, their positions and function
// names set, and handed to a sink that counts them, in batches.
func BenchmarkDeliver(b *testing.B) {
	const ringCap = 1 << 16
	m := testModule(testHook("all", ringCap, config.OverwriteOldest))
	d := NewDrainer(Options{Sink: &countingSink{}, FuncName: testFuncName, RingCapacity: ringCap,
		PollInterval: time.Hour, DumpInterval: time.Hour})
	defer d.Close()
	k, err := newConsumer(m.Hooks[0], 0, make([]uint64, ringCap*m.Hooks[0].Layout.SlotWords()), make([]uint32, ringCap), 0, ringCap)
	if err != nil {
		b.Fatal(err)
	}
	payloads := make([][]byte, 64)
	for i := range payloads {
		payloads[i] = testPayload(uint64(i))
	}
	d.deliverMu.Lock()
	defer d.deliverMu.Unlock()
	b.ResetTimer()
	for done := 0; done < b.N; {
		b.StopTimer()
		n := min(ringCap, b.N-done)
		for i := range n {
			k.ring.Push(uint64(done+i), payloads[i%len(payloads)])
		}
		b.StartTimer()
		d.deliver(k, k.popped+uint64(n))
		done += n
	}
}
