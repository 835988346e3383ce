package config

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// bigProfile returns a valid profile of hooks hooks of about size bytes in
// all: each has a when, lets (as many as the size takes), fields and an
// aggregate.
func bigProfile(hooks, size int) []byte {
	var b strings.Builder
	b.WriteString("version: 1\nname: big\nhooks:\n")
	per := size / hooks
	for i := range hooks {
		start := b.Len()
		fmt.Fprintf(&b, "  - name: h%d\n    when: phase == STOP && paired && func startsWith \"AllReduce\" && channelId < %d\n", i, i%64+1)
		b.WriteString("    fields: [timestamp, {field: funcId, as: fn, type: u16}, l0]\n    buffer: {slots: 16}\n")
		b.WriteString("    aggregate: [{name: n, kind: count}]\n    let:\n      - {name: l0, expr: \"duration / 1000\"}\n")
		for l := 1; b.Len()-start < per-64; l++ {
			fmt.Fprintf(&b, "      - {name: l%d, expr: \"l%d * 2 + workCounter %% %d\"}\n", l, l-1, l+1)
		}
	}
	return []byte(b.String())
}

// A profile at the size limit parses in time and memory linear in its size
// (go test -bench ParseLargeProfile -benchmem; issue 13: the lets of a hook
// each copied the environment of all before them).
func BenchmarkParseLargeProfile(b *testing.B) {
	for _, hooks := range []int{1, MaxHooks} {
		data := bigProfile(hooks, MaxProfileBytes-4096)
		b.Run(fmt.Sprintf("hooks=%d", hooks), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Parse("big.yaml", data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// allocated returns the bytes Parse allocates for data.
func allocated(t *testing.T, data []byte) uint64 {
	t.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if _, err := Parse("big.yaml", data); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestParseCostIsLinear: the memory a profile costs grows with its size,
// not with its square. A hook's lets each copied the environment of the lets
// before it, and each built an expr-lang configuration of all of them: a
// 64 KiB hook took 0.7 s, and a 1 MiB one minutes (issue 13).
func TestParseCostIsLinear(t *testing.T) {
	for _, hooks := range []int{1, 64} {
		small := allocated(t, bigProfile(hooks, 32<<10))
		large := allocated(t, bigProfile(hooks, 128<<10))
		t.Logf("%d hook(s): 32 KiB: %d bytes allocated, 128 KiB: %d (%.1fx)", hooks, small, large, float64(large)/float64(small))
		// Linear: 4x; quadratic: 16x.
		if large > 8*small {
			t.Errorf("%d hook(s): 4x the profile allocates %.1fx the memory", hooks, float64(large)/float64(small))
		}
	}
}

// TestMessagesListBoundedNames: an unknown name in a hook of 60 lets lists
// the first 40 names it could have meant and counts the rest, so that a
// profile of thousands of lets and as many mistakes does not print the
// square of its size.
func TestMessagesListBoundedNames(t *testing.T) {
	var b strings.Builder
	b.WriteString(header + "  - name: h\n    let:\n")
	for i := range 60 {
		fmt.Fprintf(&b, "      - {name: l%d, expr: '%d'}\n", i, i)
	}
	b.WriteString("      - {name: bad, expr: nope + 1}\n    fields: [bad]\n")
	_, err := Parse("p.yaml", []byte(b.String()))
	var list ErrorList
	if !errors.As(err, &list) || len(list) != 1 {
		t.Fatalf("errors: %v", err)
	}
	// 12 catalogue names, START, STOP, then l0..l25 make 40; l26..l59 are 34 more.
	want := `p.yaml:66:27: unknown name "nope"; known: ` + knownNames + ", l0, l1, l2"
	if msg := list[0].Error(); !strings.HasPrefix(msg, want) || !strings.Contains(msg, ", l25, and 34 more (and func, in name predicates)") || strings.Contains(msg, "l26") {
		t.Errorf("message %q", msg)
	}
}
