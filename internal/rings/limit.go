package rings

// drop_newest's limits: publishing them, and deciding the holes past them at once.

// skipToLiveHead skips, once a drop_newest pass has decided every position
// below limitTried, the holes reserved since the pass read its head.
func (k *consumer) skipToLiveHead(ps *pass) {
	if k.dropNewest && k.pos >= k.limitTried && k.readHead != nil {
		// Every position up to the limit is decided. Producers went on
		// reserving during the pass, and all they reserved from the limit
		// on are holes: skip them at the live head, so that the limit
		// published next lies ahead of the producers and the next N
		// positions can hold records again (see skipHoles).
		if h, err := k.readHead(); err == nil && h > k.pos {
			k.head = h
			k.skipHoles(h, ps)
		}
	}
}

// skipHoles decides positions [pos, to) as buffer_full at once, without
// reading them; pos must be at or past limitTried. A producer writes a
// record only below the limit it loaded, and every limit it can have loaded
// is at most limitTried (the consumer is the only writer, and limits only
// grow), so no position from there on holds, or will ever hold, a record.
//
// This is drop_newest's counterpart of lapping. Without it the consumer
// decided every hole one at a time and published limit = pos + N from the
// head it read when the pass began: under sustained overload the producers
// (a hole costs them one store) had moved more than N past that before the
// limit landed, every later window was all holes, and the hook stopped
// recording for good after the buffer first filled (issue 13).
func (k *consumer) skipHoles(to uint64, ps *pass) {
	if to <= k.pos {
		return
	}
	n := to - k.pos
	k.bufferFull += n
	k.pos = to
	ps.drop(k, stageBufferFull, n)
}

// publishLimit lets producers use every slot up to N positions past the
// consumer. A failed write keeps the old limit: positions past it are then
// counted as buffer_full, which stays exact.
func (k *consumer) publishLimit() {
	if !k.dropNewest || k.setLimit == nil {
		return
	}
	l := k.pos + k.n
	if l <= k.limit {
		return
	}
	k.limitTried = max(k.limitTried, l)
	if k.setLimit(l) == nil {
		k.limit = l
	}
}
