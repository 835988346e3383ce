package rings

import (
	"math/rand/v2"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ncclhooks/ncclhooks/internal/config"
)

// mapped returns n zeroed words of anonymous memory the test unmaps, as the
// CUDA driver unmaps a buffer's host memory at process exit.
func mapped(t *testing.T, bytes int) []byte {
	t.Helper()
	b, err := unix.Mmap(-1, 0, bytes, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// drainOne starts a drainer with opts on dev, whose one hook is a
// drop_newest buffer limited to its slots, and returns it and a producer of
// n complete records.
func drainOne(t *testing.T, dev *fakeDevice, opts Options) (*Drainer, func(n int)) {
	t.Helper()
	info := dev.m.Hooks[0]
	d := NewDrainer(opts)
	if err := d.Add(dev, dev.m); err != nil {
		t.Fatal(err)
	}
	if err := dev.WriteLimit(0, uint64(info.Slots)); err != nil {
		t.Fatal(err)
	}
	return d, func(n int) {
		for range n {
			pos, _ := dev.reserve(0)
			dev.write(0, pos, testPayload(pos), info.Layout.Chunks, 0)
		}
	}
}

// TestQuiescedDrainerReadsNoMemory: the slots and hole cells of a settled,
// quiesced drainer are unmapped under it (the CUDA driver's teardown at
// process exit, which ran after the last finalize of nccl-tests' ranks and
// faulted the idle poller's burst look on the H100). Its poller, looking
// for bursts and passing, its dumps and its Close must touch none of it: a
// read would fault the test process. Close still writes the final dump
// with the settled totals.
func TestQuiescedDrainerReadsNoMemory(t *testing.T) {
	m := testModule(testHook("h", 1024, config.DropNewest))
	dev := newFakeDevice(0, m)
	info := m.Hooks[0]
	slotMem := mapped(t, 8*info.Slots*info.Layout.SlotWords())
	holeMem := mapped(t, 4*info.Slots)
	dev.slots[0] = unsafe.Slice((*uint64)(unsafe.Pointer(&slotMem[0])), len(slotMem)/8)
	dev.holes[0] = unsafe.Slice((*uint32)(unsafe.Pointer(&holeMem[0])), len(holeMem)/4)
	sink := newRecordingSink(t)
	d, write := drainOne(t, dev, Options{Sink: sink, PollInterval: 100 * time.Microsecond, IdlePollInterval: 200 * time.Microsecond, DumpInterval: time.Millisecond})
	write(100)
	if st := d.SettleQuiet().Total(); st.Records != 100 || st.Matched != 100 {
		t.Fatalf("settle: %+v", st)
	}
	if !d.Quiesce(time.Second) { // at exit, after a last finalize's SettleQuiet
		t.Fatal("Quiesce: a pass did not end within 1 s")
	}
	// A producer writing after the quiesce (the hooks must not run then)
	// would be found by the next burst look: none may look.
	write(1)
	if err := unix.Munmap(slotMem); err != nil {
		t.Fatal(err)
	}
	if err := unix.Munmap(holeMem); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // hundreds of idle looks and passes, a hundred dumps
	d.Flush(false)
	st := d.Close().Total()
	if st.Records != 100 || st.Pending != 0 {
		t.Errorf("final dump after the quiesce: %+v, want the 100 settled records", st)
	}
	if got := len(sink.records[key{"h", 0}]); got != 100 {
		t.Errorf("%d records delivered, want 100", got)
	}
}

// After Resume the drainer reads the devices again: a communicator
// initialized after the last one was finalized runs the hooks, and its
// records are drained. So too when the Resume comes while the last
// finalize's SettleQuiet still waits for a slow sink: the settle does not
// quiesce over it.
func TestResumedDrainerDrainsAgain(t *testing.T) {
	dev := newFakeDevice(0, testModule(testHook("h", 1024, config.DropNewest)))
	d, write := drainOne(t, dev, Options{PollInterval: 100 * time.Microsecond, DumpInterval: time.Hour})
	write(10)
	d.SettleQuiet()
	d.Resume()
	write(20)
	if st := d.Close().Total(); st.Records != 30 || st.Matched != 30 {
		t.Errorf("after Resume: %+v, want 30 records", st)
	}
}

func TestResumeDuringSettleQuietWins(t *testing.T) {
	sink := newRecordingSink(t)
	sink.delay = 200 * time.Millisecond // a slow file system
	dev := newFakeDevice(0, testModule(testHook("h", 1024, config.DropNewest)))
	d, write := drainOne(t, dev, Options{Sink: sink, PollInterval: 100 * time.Microsecond, DumpInterval: time.Hour})
	write(10)
	time.Sleep(50 * time.Millisecond) // the deliverer is in the sink's slow Records
	settled := make(chan Summary)
	go func() { settled <- d.SettleQuiet() }()
	time.Sleep(20 * time.Millisecond)
	d.Resume() // a communicator initialized while the settle waits
	<-settled
	write(20)
	if st := d.Close().Total(); st.Records != 30 || st.Matched != 30 {
		t.Errorf("records written after a Resume during the settle: %+v, want 30 records", st)
	}
}

// The same with work positions (the every-event profile's), whose records
// lie in per-communicator regions: a dump's statistics read the regions'
// stamps for the positions pending (the second fault on the H100, after
// nccl-tests' last finalize: consumer.stats, workPending, from the
// deliverer's periodic dump). A quiesced drainer's dumps read none of it.
func TestQuiescedDrainerReadsNoRegions(t *testing.T) {
	const regionSlots, channels, items = 16, 2, 200
	info := testHook("work", config.RegionChannels*regionSlots, config.OverwriteOldest)
	info.Work, info.RegionSlots = true, regionSlots
	m := testModule(info)
	m.Work = true
	dev := newFakeDevice(0, m)
	if _, err := dev.CommCtx(0); err != nil {
		t.Fatal(err)
	}
	mem := mapped(t, 8*len(dev.work[0][0]))
	dev.work[0][0] = unsafe.Slice((*uint64)(unsafe.Pointer(&mem[0])), len(mem)/8)
	d := NewDrainer(Options{FuncName: testFuncName, PollInterval: 100 * time.Microsecond, DumpInterval: time.Millisecond})
	if err := d.Add(dev, m); err != nil {
		t.Fatal(err)
	}
	c := info.Layout.Chunks
	w := regionSlots * c
	var emitted uint64
	for ch := range channels {
		g := &regionProducer{slots: dev.Regions(0, 0)[ch*w : (ch+1)*w], n: regionSlots, c: c,
			rng: rand.New(rand.NewPCG(1, uint64(ch))), complete: map[uint64]bool{}}
		g.run(items, 0, 0, func() { time.Sleep(time.Microsecond) })
		emitted += uint64(2 * items)
	}
	settled := d.SettleQuiet().Total()
	if settled.Matched != emitted || settled.Pending != 0 {
		t.Fatalf("settle: %+v, want %d matched", settled, emitted)
	}
	if err := unix.Munmap(mem); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // a hundred dumps
	d.Flush(false)
	if st := d.Close().Total(); st.Matched != emitted || st.Records+st.Dropped != st.Matched || st.Pending != 0 {
		t.Errorf("final dump after the quiesce: %+v, want the settled %+v", st, settled)
	}
}
