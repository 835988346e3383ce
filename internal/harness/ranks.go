package harness

// A job of several processes (ncclhooks run --ranks N): each process is a
// rank of the same communicators, and every (communicator, channel)'s work
// items are collectives between them. The ranks share one barrier file,
// mapped into each: a 32-bit count of STARTs per (communicator, channel),
// over every rank, that a batch's STOPs wait on (harness.c). Timestamps are
// CLOCK_REALTIME (the cpu backend's device clock), one clock for every
// process of the host, so the ranks' STARTs compare as they are.

import (
	"errors"
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// BarrierEnv names the barrier file of a spawned rank: the hidden worker
// mode of ncclhooks run --ranks, which sets it for each process it starts.
const BarrierEnv = "NCCLHOOKS_RANK_BARRIER"

// barrierStride keeps each counter on a cache line of its own.
const barrierStride = 64

// barrierBytes is the size of the barrier file of cfg's job.
func barrierBytes(cfg Config) int64 {
	return int64(cfg.CommsPerDevice) * int64(cfg.Channels) * barrierStride
}

// CreateBarrier creates the zeroed barrier file of cfg's job in dir and
// returns its path; the caller removes it once every rank is done.
func CreateBarrier(dir string, cfg Config) (string, error) {
	cfg.Defaults()
	f, err := os.CreateTemp(dir, "ncclhooks-ranks-*.barrier")
	if err != nil {
		return "", fmt.Errorf("harness: barrier: %w", err)
	}
	defer f.Close()
	if err := f.Truncate(barrierBytes(cfg)); err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("harness: barrier: %w", err)
	}
	return f.Name(), nil
}

// barrier is a mapped barrier file.
type barrier struct{ mem []byte }

// openBarrier maps the barrier file at path, which must be cfg's job's.
func openBarrier(path string, cfg Config) (*barrier, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("harness: barrier: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("harness: barrier: %w", err)
	}
	if st.Size() != barrierBytes(cfg) {
		return nil, fmt.Errorf("harness: barrier %s: %d bytes, want %d: every rank of a job plays the same communicators and channels", path, st.Size(), barrierBytes(cfg))
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("harness: barrier: mmap %s: %w", path, err)
	}
	return &barrier{mem: mem}, nil
}

// counter is the START count of communicator k's channel ch: memory
// outside the Go heap, which C may keep.
func (b *barrier) counter(cfg Config, k, ch int) unsafe.Pointer {
	if b == nil {
		return nil
	}
	return unsafe.Pointer(&b.mem[(k*cfg.Channels+ch)*barrierStride])
}

func (b *barrier) close() error {
	if b == nil {
		return nil
	}
	return unix.Munmap(b.mem)
}

// checkRanks validates the multi-rank fields of cfg.
func checkRanks(cfg Config) error {
	nranks := max(cfg.Ranks, 1) * cfg.Devices
	switch {
	case cfg.StragglerDelay < 0:
		return fmt.Errorf("harness: straggler delay %v: give a duration of 0 or more", cfg.StragglerDelay)
	case cfg.StragglerDelay > 0 && (cfg.Straggler < 0 || cfg.Straggler >= nranks):
		return fmt.Errorf("harness: straggler rank %d: the job's ranks are 0 to %d", cfg.Straggler, nranks-1)
	case (cfg.Barrier != "" || cfg.StragglerDelay > 0) && cfg.Backend != "cpu":
		return errors.New("harness: collectives between ranks and a planted straggler exist on the cpu backend only")
	case cfg.Barrier != "" && cfg.Ranks == 0:
		return errors.New("harness: a barrier between ranks needs a job of ranks (--ranks)")
	}
	return nil
}
