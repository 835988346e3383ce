package cpu_test

import (
	"slices"
	"testing"

	"github.com/ncclhooks/ncclhooks/internal/backend/cpu/internal/cdrive"
	"github.com/ncclhooks/ncclhooks/internal/config"
)

// Profiles parsed from YAML by package config go through the generator and
// the cpu backend unchanged.
func TestParsedProfiles(t *testing.T) {
	p, err := config.Load("../../../examples/all-events.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m, d := load(t, p, 0)
	ev := cdrive.Event{Timestamp: 12345, WorkCounter: 6, FuncID: 77, ChannelID: 3, Phase: cdrive.Stop}
	call(d, ev)
	// The example records the communicator index last: the module's own
	// context is communicator 0's.
	if got, want := unsigned(record(t, d, m.Hooks[0], 0)), append(eventValues(ev), 0); !slices.Equal(got, want) {
		t.Fatalf("record %v, want %v", got, want)
	}

	p, err = config.Parse("lat.yaml", []byte(`version: 1
name: lat
hooks:
  - name: lat
    when: phase == STOP && func startsWith "AllReduce"
    sample: 1/2
    let:
      - {name: us, expr: "duration / 1000"}
    fields: [workCounter, {field: us, type: u32}]
    aggregate:
      - {name: h, kind: histogram, value: duration, by: [funcId], buckets: log2}
`))
	if err != nil {
		t.Fatal(err)
	}
	m, d = load(t, p, 0)
	sets := [][]uint32{make([]uint32, 256)}
	sets[0][0] = 1 << 5 // funcId 5 is an AllReduce
	if err := d.WriteFuncSets(sets); err != nil {
		t.Fatal(err)
	}
	var s []cdrive.Event
	for wc := range uint64(6) {
		for _, f := range []uint32{5, 6} {
			s = append(s,
				cdrive.Event{Timestamp: 1000, WorkCounter: wc, FuncID: f, Phase: cdrive.Start},
				cdrive.Event{Timestamp: 1000 + 2500*(wc+1), WorkCounter: wc, FuncID: f, Phase: cdrive.Stop})
		}
	}
	cdrive.Run(d.Entry(), d.Ctx(), [][]cdrive.Event{s})
	if head := readCtl(t, m, d)[0]; head != 3 {
		t.Fatalf("%d records, want 3 (work items 0, 2, 4 of funcId 5)", head)
	}
	for pos, wc := range []uint64{0, 2, 4} {
		if got, want := unsigned(record(t, d, m.Hooks[0], uint64(pos))), []uint64{wc, 25 * (wc + 1) / 10}; !slices.Equal(got, want) {
			t.Errorf("record %d = %v, want %v", pos, got, want)
		}
	}
	agg := readAgg(t, m, d)
	a := m.Aggs[0]
	row := agg[a.Offset+a.Row(5, 0)*a.RowWords:][:a.RowWords]
	if row[0] != 3 || row[1] != 2500+7500+12500 || row[2+12] != 1 || row[2+13] != 1 || row[2+14] != 1 {
		t.Errorf("histogram row of funcId 5 = count %d sum %d buckets %v", row[0], row[1], row[2:18])
	}
}
