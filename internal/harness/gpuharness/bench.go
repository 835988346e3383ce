package gpuharness

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/ncclhooks/ncclhooks/internal/cuda"
)

// CostOptions shapes the per-call cost benchmark. Zero fields take the
// defaults: 32 blocks x 4000 calls, 5 rounds.
type CostOptions struct {
	Blocks  int      // blocks whose thread 0 calls the hook concurrently
	Calls   int      // back-to-back calls per block (START/STOP alternating)
	Rounds  int      // timed rounds per hook, after one warm-up round
	FuncIDs []uint32 // function ids of the events, cycled per START/STOP pair
}

func (o *CostOptions) defaults() error {
	if o.Blocks == 0 {
		o.Blocks = 32
	}
	if o.Calls == 0 {
		o.Calls = 4000
	}
	if o.Rounds == 0 {
		o.Rounds = 5
	}
	if len(o.FuncIDs) == 0 {
		o.FuncIDs = []uint32{0}
	}
	switch {
	case o.Blocks < 1 || o.Blocks > 1<<16:
		return fmt.Errorf("hook cost: Blocks = %d: want 1..65536", o.Blocks)
	case o.Calls < 1:
		return fmt.Errorf("hook cost: Calls = %d: want at least 1", o.Calls)
	case o.Rounds < 1:
		return fmt.Errorf("hook cost: Rounds = %d: want at least 1", o.Rounds)
	}
	return nil
}

// HookCost is the per-call cost of one hook on NCCL's calling thread.
type HookCost struct {
	Hook string
	// NsPerCall is the median over rounds of the mean over blocks of a
	// block's loop time divided by its calls; MinNsPerCall the best round.
	NsPerCall    float64
	MinNsPerCall float64
	// MaxBlockNsPerCall is the slowest block of any round.
	MaxBlockNsPerCall float64
	CyclesPerCall     float64 // median, SM clock cycles
	// RatioToNop is NsPerCall over the nop hook's, measured in the same run.
	RatioToNop float64
}

// HookCost measures each hook's per-call cost against a nop hook that it
// compiles and loads itself, so the ratio always compares the same run. The
// first row is the nop hook. The hooks must tolerate Blocks*Calls events per
// round (a recording hook may drop).
func (h *Harness) HookCost(hooks []Hook, opt CostOptions) (_ []HookCost, err error) {
	if err := opt.defaults(); err != nil {
		return nil, err
	}
	nop, err := LoadNopHook(h.dev, h.cache)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, nop.Close()) }()
	all := append([]Hook{nop.Hook}, hooks...)
	for _, hk := range all {
		if hk.Entry == 0 {
			return nil, fmt.Errorf("hook cost: hook %q has no entry address", hk.Name)
		}
	}

	stream, err := h.dev.NewStream()
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, stream.Destroy()) }()
	ids := make([]byte, 4*len(opt.FuncIDs))
	for i, id := range opt.FuncIDs {
		binary.LittleEndian.PutUint32(ids[4*i:], id)
	}
	idsDev, err := h.dev.Alloc(len(ids))
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, h.dev.Free(idsDev)) }()
	if err := h.dev.CopyHtoD(idsDev, ids, stream); err != nil {
		return nil, err
	}
	outDev, err := h.dev.Alloc(16 * opt.Blocks)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, h.dev.Free(outDev)) }()
	samples, err := h.costRounds(all, opt, stream, idsDev, outDev)
	if err != nil {
		return nil, err
	}
	return samples.rows(all), nil
}

// costSamples are the cost benchmark's measurements, by hook: the mean ns
// and cycles per call over the blocks of each round, and the slowest block
// of any round.
type costSamples struct {
	ns, cycles [][]float64 // [hook][round]
	maxBlock   []float64
}

// costRounds runs a warm-up round and opt.Rounds timed rounds of the cost
// kernel for each hook; outDev holds 16 bytes per block (ns, cycles).
func (h *Harness) costRounds(all []Hook, opt CostOptions, stream *cuda.Stream, idsDev, outDev uint64) (*costSamples, error) {
	out := make([]byte, 16*opt.Blocks)
	s := &costSamples{ns: make([][]float64, len(all)), cycles: make([][]float64, len(all)), maxBlock: make([]float64, len(all))}
	// Rounds interleave the hooks so that clock changes hit them alike.
	for round := -1; round < opt.Rounds; round++ {
		for i, hk := range all {
			err := h.dev.Launch(h.hookCost, [3]uint32{uint32(opt.Blocks), 1, 1}, [3]uint32{32, 1, 1}, 0, stream,
				hk.Entry, hk.Ctx, int32(opt.Calls), idsDev, int32(len(opt.FuncIDs)), outDev)
			if err != nil {
				return nil, fmt.Errorf("hook cost of %s: %w", hk.Name, err)
			}
			if err := h.dev.CopyDtoH(out, outDev, stream); err != nil {
				return nil, fmt.Errorf("hook cost of %s: %w", hk.Name, err)
			}
			if round < 0 {
				continue // warm-up: instruction caches, first-touch of the hook's memory
			}
			var sumNs, sumCycles float64
			for b := range opt.Blocks {
				perCall := float64(binary.LittleEndian.Uint64(out[16*b:])) / float64(opt.Calls)
				sumNs += perCall
				sumCycles += float64(binary.LittleEndian.Uint64(out[16*b+8:])) / float64(opt.Calls)
				s.maxBlock[i] = max(s.maxBlock[i], perCall)
			}
			s.ns[i] = append(s.ns[i], sumNs/float64(opt.Blocks))
			s.cycles[i] = append(s.cycles[i], sumCycles/float64(opt.Blocks))
		}
	}
	return s, nil
}

// rows are the hooks' costs (medians over the rounds), with the ratio of each
// to the first hook, the nop.
func (s *costSamples) rows(all []Hook) []HookCost {
	rows := make([]HookCost, len(all))
	for i, hk := range all {
		rows[i] = HookCost{
			Hook:              hk.Name,
			NsPerCall:         median(s.ns[i]),
			MinNsPerCall:      slices.Min(s.ns[i]),
			MaxBlockNsPerCall: s.maxBlock[i],
			CyclesPerCall:     median(s.cycles[i]),
		}
	}
	for i := range rows {
		rows[i].RatioToNop = rows[i].NsPerCall / rows[0].NsPerCall
	}
	return rows
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// WriteCostTable prints rows as an aligned table.
func WriteCostTable(w io.Writer, rows []HookCost) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "hook\tns/call\tbest\tslowest block\tcycles/call\tx nop\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%.1f\t%.0f\t%.2f\t\n",
			r.Hook, r.NsPerCall, r.MinNsPerCall, r.MaxBlockNsPerCall, r.CyclesPerCall, r.RatioToNop)
	}
	return tw.Flush()
}

// Throughput is one event-rate run of the harness kernel.
type Throughput struct {
	Hook         string
	TargetRate   float64 // events/s asked for (0: unpaced)
	Emitted      uint64  // events passed to the hook on the device
	Elapsed      time.Duration
	KernelMs     float32
	EventsPerSec float64 // achieved, per device, over the kernels' GPU time
}

// Throughput runs cfg (usually with EventRate set and LogEvents off) and
// reports the events emitted and the rate achieved. Combine Emitted with the
// drain's drop counts for the zero-drop rate.
func (h *Harness) Throughput(hook Hook, cfg Config) (*Throughput, error) {
	if hook.Entry == 0 {
		return nil, errors.New("throughput: the hook has no entry address")
	}
	res, err := h.Run(hook, cfg)
	if err != nil {
		return nil, err
	}
	return &Throughput{
		Hook:         hook.Name,
		TargetRate:   cfg.EventRate,
		Emitted:      res.Emitted(),
		Elapsed:      res.Elapsed,
		KernelMs:     res.KernelMs,
		EventsPerSec: res.EventsPerSec(),
	}, nil
}

// WriteThroughputTable prints rows as an aligned table.
func WriteThroughputTable(w io.Writer, rows []*Throughput) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "hook\ttarget ev/s\tevents\tkernel ms\tev/s\t")
	for _, r := range rows {
		target := "max"
		if r.TargetRate > 0 {
			target = fmt.Sprintf("%.3g", r.TargetRate)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.2f\t%.3g\t\n", r.Hook, target, r.Emitted, r.KernelMs, r.EventsPerSec)
	}
	return tw.Flush()
}
