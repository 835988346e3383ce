package gpuharness

// Reading one Harness.Run back: the device counters, the data moved and the
// event log, checked against the configuration.

import (
	"encoding/binary"
	"fmt"

	"github.com/ncclhooks/ncclhooks/internal/abi"
)

// collect reads the device counters (and the log) back and checks them
// against the configuration and the data against the source pattern.
func (r *run) collect(res *Result) error {
	cfg, dev := &r.cfg, r.h.dev
	state := make([]byte, cfg.Channels*channelStateBytes)
	for i, c := range r.comms {
		if err := dev.CopyDtoH(state, c.state, c.stream); err != nil {
			return fmt.Errorf("harness: reading communicator %d's counters: %w", i, err)
		}
		var items, emitted uint64
		perChannel := make([]uint64, cfg.Channels)
		for ch := range cfg.Channels {
			it := binary.LittleEndian.Uint64(state[ch*channelStateBytes:]) - cfg.FirstCounter(i) // the next counter, less the first
			perChannel[ch] = binary.LittleEndian.Uint64(state[ch*channelStateBytes+8:])
			if want := cfg.ItemsPerComm() / uint64(cfg.Channels); it != want {
				return fmt.Errorf("harness: communicator %d channel %d ran %d work items, want %d", i, ch, it, want)
			}
			items += it
			emitted += perChannel[ch]
		}
		res.ItemsPerComm = append(res.ItemsPerComm, items)
		res.EmittedPerComm = append(res.EmittedPerComm, emitted)
		if err := r.verifyData(i); err != nil {
			return err
		}
		if c.log != 0 {
			evs, err := r.readLog(i, perChannel)
			if err != nil {
				return err
			}
			res.Events = append(res.Events, evs)
		}
	}
	return nil
}

// verifyData checks the first and the last item region of communicator i:
// each must hold the source summed once per execution of its item.
func (r *run) verifyData(i int) error {
	cfg, c := &r.cfg, r.comms[i]
	n := cfg.executionsPerItem()
	buf := make([]byte, cfg.BytesPerItem)
	regions := cfg.Channels * cfg.ItemsPerBatch
	for _, region := range []int{0, regions - 1} {
		off := region * cfg.BytesPerItem
		if err := r.h.dev.CopyDtoH(buf, c.dst+uint64(off), c.stream); err != nil {
			return fmt.Errorf("harness: reading communicator %d's destination: %w", i, err)
		}
		for w := 0; w < len(buf)/4; w++ {
			word := uint64(off/4 + w)
			got := binary.LittleEndian.Uint32(buf[4*w:])
			if want := n * fillPattern(word, fillSeed(i)); got != want {
				return fmt.Errorf("harness: communicator %d: destination word %d = %#x, want %#x (%d reductions of %#x): the kernel did not do its work",
					i, word, got, want, n, fillPattern(word, fillSeed(i)))
			}
		}
	}
	return nil
}

// readLog decodes communicator i's event log.
func (r *run) readLog(i int, emitted []uint64) ([]Event, error) {
	cfg, c := &r.cfg, r.comms[i]
	capEvents := cfg.logCap()
	buf := make([]byte, uint64(cfg.Channels)*capEvents*abi.DevEventSize)
	if err := r.h.dev.CopyDtoH(buf, c.log, c.stream); err != nil {
		return nil, fmt.Errorf("harness: reading communicator %d's event log: %w", i, err)
	}
	var evs []Event
	for ch, n := range emitted {
		if n > capEvents {
			return nil, fmt.Errorf("harness: communicator %d channel %d emitted %d events, more than the %d expected", i, ch, n, capEvents)
		}
		base := uint64(ch) * capEvents * abi.DevEventSize
		for k := range n {
			evs = append(evs, abi.DecodeDevEvent(buf[base+k*abi.DevEventSize:]))
		}
	}
	return evs, nil
}
