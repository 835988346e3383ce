package lifecycle

import (
	"github.com/ncclhooks/ncclhooks/internal/backend"
	"github.com/ncclhooks/ncclhooks/internal/sinks"
)

// Retired is how many communicators of device ord the drain retired (its
// finalized ones, with work positions), the last one's block, and how many
// entries its queues of them hold (rings.Drainer.Retired).
func (s *Session) Retired(ord int) (total, last, queued int) { return s.drainer.Retired(ord) }

// DeviceState is what the drainer writes in a device's device lines.
func (s *Session) DeviceState(d backend.Device) sinks.DeviceState { return s.deviceState(d) }

// Budget is the registers a hook may use and what the kernels that call
// the hook have (0: not read).
func (s *Session) Budget() (budget, read int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waitBudget()
	return s.budget, s.budgetRead
}

// Blocks is how many context blocks device ord's active module has made.
func (s *Session) Blocks(ord int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.devices[ord].Comms()
}

// FreeBlocks is how many of device ord's context blocks are free.
func (s *Session) FreeBlocks(ord int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, n := s.devices[ord], 0
	for slot := range d.Comms() {
		if d.CommIndex(slot) < 0 {
			n++
		}
	}
	return n
}
