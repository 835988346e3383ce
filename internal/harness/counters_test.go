package harness

import "testing"

// The cpu harness numbers work items as NCCL does: every (communicator,
// channel) from 1, never 0 (a record mode that takes positions from the
// counter drains from 2*1), the communicators kept apart by counterStride.
// Without a hook (no plugin loaded) the channels still log what they emit.
func TestCPUCountersStartAtOne(t *testing.T) {
	comms := []*comm{
		{Comm: &Comm{Device: 0}, index: 0},
		{Comm: &Comm{Device: 0}, index: 1},
		{Comm: &Comm{Device: 1}, index: 0},
	}
	cfg := Config{Channels: 3, Items: 7, Batch: 2, WorkFloats: 1, FuncIDs: []uint32{0}, Verify: true}
	logs, emitted, _, err := emitCPU(comms, cfg, counterStride, nil)
	if err != nil {
		t.Fatal(err)
	}
	type key struct {
		dev, comm int
		ch        uint8
		phase     uint8
	}
	// START and STOP per item: two communicators on device 0, one on 1.
	for d, n := range []uint64{2 * 2 * 3 * 7, 1 * 2 * 3 * 7} {
		if emitted[d] != n {
			t.Errorf("device %d emitted %d events, want %d", d, emitted[d], n)
		}
	}
	seen := map[key]uint64{}
	for d, evs := range logs {
		for _, e := range evs {
			k := key{d, e.Comm, e.ChannelID, e.Phase}
			if seen[k] == 0 && uint32(e.WorkCounter) != 1 {
				t.Errorf("device %d comm %d channel %d phase %d: first workCounter %#x, want low 32 bits 1", d, e.Comm, e.ChannelID, e.Phase, e.WorkCounter)
			}
			if want := firstCounter(e.Comm, counterStride) + seen[k]; e.WorkCounter != want {
				t.Fatalf("device %d comm %d channel %d phase %d: workCounter %#x, want %#x", d, e.Comm, e.ChannelID, e.Phase, e.WorkCounter, want)
			}
			seen[k]++
		}
	}
	if len(seen) != len(comms)*cfg.Channels*2 {
		t.Fatalf("%d (device, comm, channel, phase) logged, want %d", len(seen), len(comms)*cfg.Channels*2)
	}
	for k, n := range seen {
		if n != uint64(cfg.Items) {
			t.Errorf("%+v: %d work items, want %d", k, n, cfg.Items)
		}
	}
	for k := range 3 {
		if c := firstCounter(k, counterStride); uint32(c) != 1 || c>>40 != uint64(k) {
			t.Errorf("firstCounter(%d) = %#x: want low 32 bits 1 and the communicator in bits 40 up", k, c)
		}
	}
}
