package harness

import (
	"errors"
	"fmt"
)

// The bounds of a run: what NCCL can have, and what the cpu backend's
// threads and the event log can hold.
const (
	// MaxChannels is NCCL's MAXCHANNELS. The plugin's pairing table is
	// keyed by channelId % 64 (hookgen's pairChannels), so channels c and
	// c+64 of one communicator would take each other's entries and lose
	// pairings that NCCL never loses: a false MISMATCH.
	MaxChannels = 64
	// MaxBatch is the most work items NCCL starts before it stops the
	// first (its offsetBitset has 64 bits); harness.c refuses more.
	MaxBatch = 64
	// MaxCPUThreads bounds devices x comms x channels on the cpu backend,
	// which runs every channel as a thread of its own: far beyond it
	// pthread_create fails.
	MaxCPUThreads = 4096
	// MaxDevices and MaxComms bound the simulated devices and a device's
	// communicators (each device loads a module and an arena).
	MaxDevices = 256
	MaxComms   = 1024
	// MaxItems bounds the work items per channel: the event log keeps
	// every event in memory.
	MaxItems = 100_000_000
	// MaxRanks bounds a job's processes, all on this host.
	MaxRanks = 256
)

// Validate checks every field against what the harness can play, as given:
// a zero count is refused (Run fills zero fields with Defaults first; a
// caller that passes the user's values, the CLI, calls Validate on them).
// The error names each field out of range, with the range allowed.
func (c Config) Validate() error {
	var errs []error
	count := func(name string, v, lo, hi int, why string) {
		if v < lo || v > hi {
			errs = append(errs, fmt.Errorf("%s %d: allowed %d to %d (%s)", name, v, lo, hi, why))
		}
	}
	count("devices", c.Devices, 1, MaxDevices, "devices of the process")
	count("comms", c.CommsPerDevice, 1, MaxComms, "communicators per device")
	count("channels", c.Channels, 1, MaxChannels, "NCCL's MAXCHANNELS is 64")
	count("items", c.Items, 1, MaxItems, "work items per channel")
	count("batch", c.Batch, 1, MaxBatch, "NCCL starts at most 64 work items of a channel before it stops the first")
	count("work", c.WorkFloats, 1, 1<<24, "floats reduced per work item")
	count("bytes", c.BytesPerItem, 1, 1<<30, "bytes moved per work item")
	count("replays", c.Replays, 1, 1_000_000, "launches or graph replays per communicator")
	count("ranks", c.Ranks, 0, MaxRanks, "processes of a job; 0: a process of its own")
	if c.Slowdown != 0 && !(c.Slowdown >= 1 && c.Slowdown <= 100) {
		errs = append(errs, fmt.Errorf("slowdown %g: allowed 1 to 100 (1.05: each work item 5%% slower)", c.Slowdown))
	}
	if c.Duration < 0 {
		errs = append(errs, fmt.Errorf("duration %v: allowed 0 (one cycle) or more", c.Duration))
	}
	if c.Gap < 0 || (c.Gap > 0 && c.Duration == 0) {
		errs = append(errs, fmt.Errorf("gap %v: a pause between the cycles of a soak: give a duration too", c.Gap))
	}
	if c.Duration > 0 && c.Verify {
		errs = append(errs, fmt.Errorf("duration %v needs the event log off (no-verify): a soak's log would grow with it, and its cycles repeat work counters", c.Duration))
	}
	if c.EventRate < 0 || (c.EventRate > 0 && c.Backend != "gpu") {
		errs = append(errs, fmt.Errorf("event-rate %g: a positive rate in events per second paces the gpu backend's kernels; 0: unpaced", c.EventRate))
	}
	switch c.Backend {
	case "cpu", "gpu":
	default:
		errs = append(errs, fmt.Errorf("backend %q: allowed cpu or gpu", c.Backend))
	}
	if c.Backend == "cpu" && len(errs) == 0 {
		if n := c.Devices * c.CommsPerDevice * c.Channels; n > MaxCPUThreads {
			errs = append(errs, fmt.Errorf("devices %d x comms %d x channels %d = %d channels: the cpu backend runs each as a thread, at most %d",
				c.Devices, c.CommsPerDevice, c.Channels, n, MaxCPUThreads))
		}
	}
	return errors.Join(errs...)
}
