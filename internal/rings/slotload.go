package rings

// Loading slot words: the stage filled ahead of the decisions, and the wait
// for a late writer.

import (
	"sync"
	"sync/atomic"
	"time"
)

// Staging: positions loaded ahead per fill, and how many goroutines share a
// large fill. The device writes the slots into host-mapped memory, so each
// slot's first load misses the host's caches; loading many slots at once
// overlaps those misses instead of taking them one by one.
const (
	stageMax       = 8192
	stageParallel  = 4
	stageSplitMore = 1024 // positions per goroutine before a fill is split
)

// load copies the words of position p's slot into k.words from the stage
// (filling it first when it does not hold p) and counts the words stamped s
// (equal) and whether any carries a newer stamp.
func (k *consumer) load(p, head uint64, s uint32) (equal int, isNewer bool) {
	// Load every word once; the stamp and the chunk of a word come from
	// the same single-copy-atomic load, so a word is trusted on its own.
	if p < k.stageFrom || p >= k.stageTo {
		k.fill(p, head)
	}
	staged := k.stage[int(p-k.stageFrom)*k.chunks:]
	for i := range k.words {
		w := staged[i]
		k.words[i] = w
		switch x := uint32(w >> 32); {
		case x == s:
			equal++
		case newer(x, s, k.n):
			isNewer = true
		}
	}
	return equal, isNewer
}

// fill stages the slot words of positions [p, min(head, p+stageMax)).
func (k *consumer) fill(p, head uint64) {
	n := min(head-p, stageMax)
	if need := int(n) * k.chunks; cap(k.stage) < need {
		k.stage = make([]uint64, stageMax*k.chunks)
	}
	k.stage = k.stage[:int(n)*k.chunks]
	k.stageFrom, k.stageTo = p, p+n
	load := func(from, to uint64) {
		for q := from; q < to; q++ {
			src := int(q&(k.n-1)) * k.chunks
			dst := int(q-p) * k.chunks
			for i := 0; i < k.chunks; i++ {
				k.stage[dst+i] = atomic.LoadUint64(&k.slots[src+i])
			}
		}
	}
	workers := min(uint64(stageParallel), max(n/stageSplitMore, 1))
	if workers == 1 {
		load(p, p+n)
		return
	}
	var wg sync.WaitGroup
	per := (n + workers - 1) / workers
	for w := uint64(0); w < workers; w++ {
		from, to := p+w*per, min(p+(w+1)*per, p+n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			load(from, to)
		}()
	}
	wg.Wait()
}

// spin re-reads slot j until every word carries stamp s (true) or holeGrace
// has passed since the run of pending positions began (false).
func (k *consumer) spin(j uint64, s uint32, ps *pass) bool {
	base := int(j) * k.chunks
	for {
		all := true
		for i := range k.words {
			if uint32(atomic.LoadUint64(&k.slots[base+i])>>32) != s {
				all = false
				break
			}
		}
		if all {
			return true
		}
		now := time.Now()
		ps.now = now
		if now.Sub(k.seenAt) >= ps.holeGrace {
			return false
		}
	}
}
