package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/ncclhooks/ncclhooks/config"
	"github.com/ncclhooks/ncclhooks/harness"
)

// runCheck checks outputs the plugin wrote inside a job the harness did not
// play (real NCCL, or a caller built elsewhere): records + drops = matched
// for every hook and device, aggregates and records against the caller's
// event logs when there are some, one comm line per communicator, and for
// hooks that record comm, channelId, workCounter and phase one START and one
// STOP per work item, with function names from NCCL.
func runCheck(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	profPath := fs.String("profile", "", "the profile the job ran (required)")
	events := fs.String("events", "", "directory of the caller's event logs (events-dev<d>-comm<k>.bin), if it wrote any")
	comms := fs.Int("comms", 0, "communicators each device must have a comm line for (0: do not check)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: ncclhooks check OUTPUT_DIR --profile PROFILE [--events DIR] [--comms N]")
		fs.PrintDefaults()
	}
	if err := parseInterspersed(fs, args); err != nil {
		return 2
	}
	if fs.NArg() != 1 || *profPath == "" {
		fs.Usage()
		return 2
	}
	prof, err := config.Load(*profPath)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	files, err := harness.OutputFiles(fs.Arg(0))
	if err != nil {
		fmt.Fprintln(stderr, "ncclhooks check:", err)
		return 2
	}
	var logs map[int][]harness.Event
	var emitted map[int]uint64
	if *events != "" {
		if logs, emitted, err = harness.ReadEventLogs(*events); err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
	}
	ok := true
	for _, file := range files {
		devices, commsOf, err := outputDevices(file)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
		fmt.Fprintf(stdout, "%s: %d device(s), communicators per device %v\n", file, devices, commsOf)
		s, err := harness.CheckFile(prof, file, devices, logs, emitted)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
		s.Print(stdout)
		ok = ok && (s.OK() || len(s.Rows)+len(s.Aggs) == 0 && len(s.Problems) == 0) && len(s.Refused) == 0
		for d := range devices {
			if *comms > 0 && commsOf[d] != *comms {
				fmt.Fprintf(stdout, "MISMATCH device %d: %d comm lines, want %d\n", d, commsOf[d], *comms)
				ok = false
			}
		}
		pairs, err := harness.CheckPairs(prof, file)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
		for _, p := range pairs {
			var fns []string
			for fn, n := range p.Funcs {
				fns = append(fns, fmt.Sprintf("%s x%d", fn, n))
			}
			sort.Strings(fns)
			fmt.Fprintf(stdout, "pairs %s device %d: %d work items, %d with one START and one STOP; functions: %s\n",
				p.Hook, p.Device, p.Items, p.Paired, strings.Join(fns, ", "))
			for _, pr := range p.Problems {
				fmt.Fprintf(stdout, "MISMATCH %s device %d: %s\n", p.Hook, p.Device, pr)
				ok = false
			}
		}
	}
	if !ok {
		fmt.Fprintln(stdout, "result: MISMATCH")
		return 1
	}
	fmt.Fprintln(stdout, "result: exact")
	return 0
}

// outputDevices reads the comm and dump_stats lines: the number of devices
// and the comm lines per device.
func outputDevices(file string) (int, map[int]int, error) {
	f, err := os.Open(file)
	if err != nil {
		return 0, nil, err
	}
	defer f.Close()
	devices, comms := 0, map[int]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var l struct {
			Type   string `json:"type"`
			Device int    `json:"device"`
		}
		if json.Unmarshal(sc.Bytes(), &l) != nil {
			continue // readOutput reports the line
		}
		switch l.Type {
		case "comm":
			comms[l.Device]++
			devices = max(devices, l.Device+1)
		case "dump_stats":
			devices = max(devices, l.Device+1)
		}
	}
	return devices, comms, sc.Err()
}
