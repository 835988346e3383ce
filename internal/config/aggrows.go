package config

// aggrows.go holds an aggregate's geometry, shared by hookgen and rings: its keys, rows
// and words per row.

// Keys is the number of rows of the aggregate: one per key combination,
// each bounded key with one more row for ids beyond its bound.
func (a *Aggregate) Keys() int {
	rows := 1
	for _, k := range a.By {
		rows *= keyBound(k) + 1
	}
	return rows
}

// keyBound is the number of ids a by key keeps apart; larger ids share the
// overflow row, the key's last.
func keyBound(key string) int {
	switch key {
	case "channelId":
		return MaxChannels
	case "comm":
		return MaxCommKeys
	}
	return MaxFuncIDs
}

// Row is the row of the key (funcID, channelID) of communicator 0.
func (a *Aggregate) Row(funcID, channelID uint32) int { return a.RowOf(funcID, channelID, 0) }

// RowOf is the row of the key (funcID, channelID, comm): keys in by order
// (funcId, channelId, comm), the last varying fastest (by funcId and
// channelId: funcId*(MaxChannels+1)+channelId), an id at or beyond its
// key's bound in the key's overflow row.
func (a *Aggregate) RowOf(funcID, channelID, comm uint32) int {
	row := 0
	for _, k := range a.By {
		id := funcID
		switch k {
		case "channelId":
			id = channelID
		case "comm":
			id = comm
		}
		row = row*(keyBound(k)+1) + int(min(id, uint32(keyBound(k))))
	}
	return row
}

// RowStrides are RowOf as arithmetic, for a caller that computes many rows
// of one aggregate: RowOf(f, c, m) = min(f, MaxFuncIDs)*funcID +
// min(c, MaxChannels)*channelID + min(m, MaxCommKeys)*comm, a stride 0 for
// a key the aggregate is not keyed by.
type RowStrides struct{ FuncID, ChannelID, Comm int }

// Strides returns the aggregate's RowStrides: the last key in by order
// varies fastest.
func (a *Aggregate) Strides() RowStrides {
	var s RowStrides
	stride := 1
	for i := len(a.By) - 1; i >= 0; i-- {
		switch a.By[i] {
		case "channelId":
			s.ChannelID = stride
		case "comm":
			s.Comm = stride
		default:
			s.FuncID = stride
		}
		stride *= keyBound(a.By[i]) + 1
	}
	return s
}

// Row is RowOf with the strides.
func (s RowStrides) Row(funcID, channelID, comm uint32) int {
	return int(min(funcID, MaxFuncIDs))*s.FuncID + int(min(channelID, MaxChannels))*s.ChannelID + int(min(comm, MaxCommKeys))*s.Comm
}

// RowKey is the funcId and channelId keys of a row (RowKeys without comm).
func (a *Aggregate) RowKey(row int) (funcID, channelID int) {
	funcID, channelID, _ = a.RowKeys(row)
	return funcID, channelID
}

// RowKeys is RowOf's inverse: the funcId, channelId and comm keys of a row,
// each -1 when the aggregate is not keyed by it, and MaxFuncIDs,
// MaxChannels or MaxCommKeys for the overflow row.
func (a *Aggregate) RowKeys(row int) (funcID, channelID, comm int) {
	funcID, channelID, comm = -1, -1, -1
	for i := len(a.By) - 1; i >= 0; i-- {
		n := keyBound(a.By[i]) + 1
		switch a.By[i] {
		case "channelId":
			channelID = row % n
		case "comm":
			comm = row % n
		default:
			funcID = row % n
		}
		row /= n
	}
	return funcID, channelID, comm
}

// RowWords is the number of 64-bit words of one row of the aggregate.
func (a *Aggregate) RowWords() int {
	switch a.Kind {
	case AggCount:
		return 1
	case AggHistogram:
		return 2 + a.Buckets.Count()
	}
	return 2
}

// Count is the number of histogram buckets, the +Inf bucket included.
func (b Buckets) Count() int {
	if b.Log2 {
		return Log2Buckets
	}
	return len(b.Bounds) + 1
}
