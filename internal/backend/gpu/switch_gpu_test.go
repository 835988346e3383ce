package gpu

import (
	"testing"

	gpuharness "github.com/ncclhooks/ncclhooks/internal/harness/gpuharness"
)

// TestSwitchResources is what ptxas makes of the reload switch on this GPU:
// its registers and stack frame, and whether NCCL's kernels could be handed
// it (CheckSwitch without the harness's allowance). Logged for
// bench/RESULTS.md; it fails only where the switch is unsafe even for the
// ncclhooks harness.
func TestSwitchResources(t *testing.T) {
	lib := openLib(t)
	comp, err := Compile(allEventsModule(t, 64), lib, Options{})
	if err != nil {
		t.Fatal(err)
	}
	sw, err := NewSwitch(comp, true)
	if err != nil {
		t.Fatal(err)
	}
	entry, err := sw.Entry(0)
	if err != nil {
		t.Fatalf("the switch under the harness's allowance: %v", err)
	}
	res, _ := sw.Resources(0)
	verdict := "NCCL's kernels may be handed it"
	if err := CheckSwitch(res, comp.opt.Budget, false); err != nil {
		verdict = "refused for NCCL's kernels: " + err.Error()
	}
	t.Logf("reload switch at %#x: %s; %s", entry, res, verdict)
}

// TestSwitchOnGPU calls two generated modules through the switch from the
// harness's kernel, one after the other, with the same entry and devCtx: the
// caller's pointers never change, the slot's pair does. Every event of each
// run reserves a position in the module active during it, and none in the
// other.
func TestSwitchOnGPU(t *testing.T) {
	lib := openLib(t)
	const slots = 1 << 14
	a := loadWithCaller(t, lib, allEventsModule(t, slots), nil)
	b := loadWithCaller(t, lib, allEventsModule(t, slots), nil)
	for _, p := range []*played{a, b} {
		if err := p.dev.WriteLimit(0, slots); err != nil {
			t.Fatal(err)
		}
	}
	sw, err := NewSwitch(a.dev.c, true)
	if err != nil {
		t.Fatal(err)
	}
	entry, err := sw.Entry(0)
	if err != nil {
		t.Fatal(err)
	}
	slot, err := sw.NewSlot(0)
	if err != nil {
		t.Fatal(err)
	}
	heads := func() (uint64, uint64) {
		ca, cb := make([]uint64, a.dev.c.mod.CtlWords()), make([]uint64, b.dev.c.mod.CtlWords())
		if err := a.dev.ReadCtl(ca); err != nil {
			t.Fatal(err)
		}
		if err := b.dev.ReadCtl(cb); err != nil {
			t.Fatal(err)
		}
		return ca[0], cb[0]
	}
	const blocks, n = 8, 100 // 1600 events a run
	run := func() {
		cfg := gpuharness.Config{Comms: 1, Channels: blocks, Launches: 1, Batches: n / 4, ItemsPerBatch: 4,
			BytesPerItem: 16, FuncIDs: []uint32{7}, Replays: 1}
		if _, err := gpuharness.Run(a.dev.d.(cudaDriver).d, uint64(entry), []uint64{uint64(slot)}, cfg); err != nil {
			t.Fatalf("the harness's kernel calling the switch: %v", err)
		}
	}
	run() // an empty slot calls nothing
	if ha, hb := heads(); ha != 0 || hb != 0 {
		t.Fatalf("heads %d, %d after a run through an empty slot, want 0, 0", ha, hb)
	}
	if err := sw.Set(0, slot, a.dev.Entry(), a.dev.Ctx()); err != nil {
		t.Fatal(err)
	}
	run()
	if ha, hb := heads(); ha != 2*blocks*n || hb != 0 {
		t.Fatalf("heads %d, %d with module a active, want %d, 0", ha, hb, 2*blocks*n)
	}
	if err := sw.Set(0, slot, b.dev.Entry(), b.dev.Ctx()); err != nil {
		t.Fatal(err)
	}
	run()
	if ha, hb := heads(); ha != 2*blocks*n || hb != 2*blocks*n {
		t.Fatalf("heads %d, %d after the switch to b, want %d, %d", ha, hb, 2*blocks*n, 2*blocks*n)
	}
}
