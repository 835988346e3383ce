package rings

// The drain of hooks with work positions (hookgen.HookInfo.Work): one
// regionCursor per (communicator, channel), over the regions in each
// communicator's block. There is no head: the stamps alone decide.

// workLookahead is how far past a cursor a dump's pending count looks for
// positions already written: NCCL starts a batch's work items (at most 64)
// before it stops the first, so the positions written ahead of an
// undecided one lie within 128 of it.
const workLookahead = 256

// addRegions adds the cursors of the communicators whose blocks were made
// since the last pass, RegionChannels of them each.
func (k *consumer) addRegions() {
	for c := len(k.regions) / regionChannels; c < k.comms(); c++ {
		view := k.regionsOf(c)
		if len(view) != regionChannels*int(k.n)*k.chunks {
			return // not made yet, or the device is closing
		}
		w := int(k.n) * k.chunks
		for ch := range regionChannels {
			r := newRegionCursor(view[ch*w:(ch+1)*w:(ch+1)*w], k.n, k.chunks)
			r.agg, r.channel, r.comm = k.drainAggs, ch, c
			k.regions = append(k.regions, r)
		}
	}
}

// drainWork decides, region by region, what the stamps decide
// (regionCursor.take); at the final pass, every position up to the last one
// written (regionCursor.settle).
func (k *consumer) drainWork(ps *pass) passResult {
	k.addRegions()
	var res passResult
	for _, r := range k.regions {
		if !ps.final && !r.reached() {
			continue // idle: one load, where take costs a ring's bookkeeping
		}
		records, overwritten, torn := r.records, r.overwritten, r.torn
		var n uint64
		if ps.final {
			from := r.pos
			r.settle(k.ring, func() bool {
				if ps.makeRoom == nil {
					return false
				}
				ps.makeRoom(k)
				return true
			})
			n = r.pos - from
		} else {
			for {
				n += r.take(k.ring)
				// A full ring: where a pass may empty it (Flush), it
				// does, rather than leave the region to be lapped.
				if k.ring.Free() > 0 || ps.makeRoom == nil || !r.reached() {
					break
				}
				ps.makeRoom(k)
			}
		}
		if n == 0 {
			continue
		}
		res.decided += n
		res.fill = max(res.fill, float64(n)/float64(k.n))
		if d := r.overwritten - overwritten; d > 0 {
			k.overwritten += d
			ps.drop(k, stageOverwritten, d)
		}
		if d := r.torn - torn; d > 0 {
			k.torn += d
			ps.drop(k, stageTorn, d)
		}
		if r.records > records && r.agg == nil { // a drained hook's records go to its aggregates, not to the ring
			res.pushed = true
			if ps.wake != nil {
				ps.wake()
			}
		}
	}
	res.advanced = res.decided > 0
	return res
}

// workNextWritten reports whether some region's next position holds its
// record or a later one: the devices are writing again.
func (k *consumer) workNextWritten() bool {
	for _, r := range k.regions {
		if r.reached() {
			return true
		}
	}
	// A communicator made since the last pass.
	return len(k.regions) < regionChannels*k.comms()
}

// workPending counts the positions written past each region's first
// undecided one, within workLookahead of it: reserved, as far as the
// stamps tell, and not decided yet.
func (k *consumer) workPending() uint64 {
	var n uint64
	for _, r := range k.regions {
		n += r.ahead(workLookahead)
	}
	return n
}
