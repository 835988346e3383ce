package harness

// dumps.go checks every dump_stats line of a hook on a device, not only the
// final one: a soak's accounting must be exact at every dump.

import (
	"fmt"

	"github.com/ncclhooks/ncclhooks/internal/schema"
)

// maxDumpProblems bounds the problems one hook and device reports: a
// broken soak of hours would otherwise report every dump.
const maxDumpProblems = 5

// checkDumps checks the dump_stats lines of one hook on one device, in file
// order: dump numbers increasing (the drainer numbers its dumps; a hook's
// lines may start at a later one); at every dump the drops by
// stage add up to dropped_total and, for a hook that reserves positions
// (aggOnly false), matched = records + dropped + pending; the totals never
// decrease; and the since-last-dump deltas are the differences of the
// totals from the dump before. It returns problems with each dump's number.
func checkDumps(dumps []schema.DumpStats, aggOnly bool, problems []string) []string {
	n := 0
	add := func(st schema.DumpStats, format string, args ...any) {
		n++
		if n <= maxDumpProblems {
			problems = append(problems, fmt.Sprintf("dump %d: ", st.Dump)+fmt.Sprintf(format, args...))
		}
	}
	var prev schema.DumpStats
	for i, st := range dumps {
		if i > 0 && st.Dump <= prev.Dump {
			add(st, "dump number %d follows dump %d", st.Dump, prev.Dump)
		}
		if !aggOnly && st.Records+st.Dropped+st.Pending != st.Matched {
			add(st, "records %d + dropped %d + pending %d != matched %d", st.Records, st.Dropped, st.Pending, st.Matched)
		}
		if st.DroppedBufferFull+st.DroppedOverwritten+st.DroppedTorn+st.DroppedRingFull+st.DroppedWriteFailed+st.DroppedCap != st.Dropped {
			add(st, "drops by stage do not add up to dropped_total %d", st.Dropped)
		}
		if st.Matched < prev.Matched || st.Records < prev.Records || st.Dropped < prev.Dropped {
			add(st, "totals went down: matched %d -> %d, records %d -> %d, dropped %d -> %d",
				prev.Matched, st.Matched, prev.Records, st.Records, prev.Dropped, st.Dropped)
		} else if st.RecordsSinceLastDump != st.Records-prev.Records || st.DroppedSinceLastDump != st.Dropped-prev.Dropped {
			add(st, "since the last dump: records %d, dropped %d; the totals moved by %d and %d",
				st.RecordsSinceLastDump, st.DroppedSinceLastDump, st.Records-prev.Records, st.Dropped-prev.Dropped)
		}
		prev = st
	}
	if n > maxDumpProblems {
		problems = append(problems, fmt.Sprintf("%d more dump problems", n-maxDumpProblems))
	}
	return problems
}
