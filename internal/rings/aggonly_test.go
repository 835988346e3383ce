package rings

import (
	"testing"
	"time"
)

// A hook that only aggregates reserves no position: its matched_total is
// what its aggregates counted, every row (the overflow row too) on each
// device, at every dump; it has no records and no drops.
func TestAggregatesOnlyHookMatchedFromItsCounts(t *testing.T) {
	m := generateProfile(t, `version: 1
name: aggonly
hooks:
  - name: lat
    when: phase == STOP
    aggregate:
      - {name: d, kind: histogram, value: timestamp, by: [funcId], buckets: log2}
      - {name: n, kind: count, by: [channelId]}
`)
	devs := []*fakeDevice{newFakeDevice(0, m), newFakeDevice(1, m)}
	sink := newRecordingSink(t)
	sink.aggOnly = map[string]bool{"lat": true}
	d := NewDrainer(Options{Sink: sink, FuncName: testFuncName, PollInterval: time.Hour, IdlePollInterval: time.Hour, DumpInterval: time.Hour})
	defer d.Close()
	for _, dev := range devs {
		if err := d.Add(dev, m); err != nil {
			t.Fatal(err)
		}
	}
	// count adds n events to rows of both aggregates of device dev, as the
	// hook does: every aggregate counts every match.
	count := func(dev *fakeDevice, n uint64, rows ...int) {
		for _, a := range m.Aggs {
			for _, r := range rows {
				dev.agg[a.Offset+min(r, a.Keys-1)*a.RowWords] += n
			}
		}
	}
	count(devs[0], 10, 0, 3, 1<<20) // the last, past every key: the overflow row
	count(devs[1], 7, 2)
	d.Flush(false)
	count(devs[0], 5, 1)
	final := d.Settle()
	if len(sink.dumps) != 2 {
		t.Fatalf("%d dumps, want 2", len(sink.dumps))
	}
	for i, want := range []map[int]uint64{{0: 30, 1: 7}, {0: 35, 1: 7}} {
		for _, st := range sink.dumps[i].Stats {
			if st.Matched != want[st.Device] || st.Records != 0 || st.Dropped != 0 || st.Pending != 0 {
				t.Errorf("dump %d device %d: %+v, want matched %d and no records or drops", i+1, st.Device, st, want[st.Device])
			}
		}
	}
	if tot := final.Total(); tot.Matched != 42 || tot.Records != 0 {
		t.Errorf("settled: %+v, want 42 matched", tot)
	}
	if got := final.String(); got != "matched 42, records 0, dropped 0 over 1 hook(s) x 2 device(s)" {
		t.Errorf("the log's account: %q", got)
	}
	if len(sink.bad) > 0 {
		t.Error(sink.bad)
	}
}
