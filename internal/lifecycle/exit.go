package lifecycle

import (
	"fmt"
	"time"
)

// exitPassWait bounds how long Exit waits for a pass in progress to end
// before it returns to the process's exit.
const exitPassWait = 200 * time.Millisecond

// Exit is the process's exit (the plugin's atexit handler, which runs
// before the CUDA runtime's: that one was registered earlier, at the job's
// first CUDA call). Communicators not finalized (a torch job that never
// destroys its process group) get the final dump a last finalize would
// write, waited for at most NCCL_HOOKS_FINALIZE_TIMEOUT; then the drain
// reads the devices' memory no more. Without this its idle poller went on
// reading buffers in host memory that the driver's teardown unmapped, and
// faulted the process after nccl-tests' last finalize (a Go fatal error:
// exit status 2 where the job had succeeded).
func (s *Session) Exit() {
	if !lockWithin(&s.mu, s.finalizeTimeout()) {
		// A finalize or a reload holds the session: keep at least the
		// process from faulting.
		if d := s.live.Load(); d != nil {
			d.Quiesce(exitPassWait)
		}
		return
	}
	defer s.mu.Unlock()
	s.exited = true
	if s.drainer == nil {
		return
	}
	if n := len(s.comms); n > 0 && s.inactive == "" {
		if sum, ok := s.settleQuiet(); ok {
			s.env.Log(LogInfo, fmt.Sprintf("ncclhooks: process exit with %d communicator(s) not finalized: final dump written: %s; output %s", n, sum, s.jsonl.Path()))
			s.warnLost(sum)
		} else {
			s.env.Log(LogWarn, fmt.Sprintf("ncclhooks: process exit with %d communicator(s) not finalized: the output did not settle within %v (slow or hung storage under %s): the process exits without the final dump_stats", n, s.finalizeTimeout(), s.jsonl.Path()))
		}
	}
	s.drainer.Quiesce(exitPassWait)
}

// lockWithin locks mu if it can within wait.
func lockWithin(mu interface{ TryLock() bool }, wait time.Duration) bool {
	deadline := time.Now().Add(wait)
	for !mu.TryLock() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}
