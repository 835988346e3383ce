package harness

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	"github.com/ncclhooks/ncclhooks/internal/abi"
	"github.com/ncclhooks/ncclhooks/internal/schema"
)

// Event logs of callers the harness did not build (harness/callers): one file
// per device and communicator, events-dev<d>-comm<k>.bin, little endian: the
// magic "NCHKEV1\0", uint32 device, uint32 communicator index, uint64 count,
// then count ncclProfilerDevEvent_t records of 24 bytes.
const (
	eventLogMagic  = "NCHKEV1\x00"
	eventLogHeader = 24
)

var eventLogName = regexp.MustCompile(`^events-dev(\d+)-comm(\d+)\.bin$`)

// WriteEventLogs writes logs (events by device, each with its communicator)
// into dir as ReadEventLogs reads them: one file per device and communicator,
// events in the order given.
func WriteEventLogs(dir string, logs map[int][]Event) error {
	type key struct{ dev, comm int }
	files := map[key][]byte{}
	counts := map[key]uint64{}
	for dev, evs := range logs {
		for _, e := range evs {
			k := key{dev, e.Comm}
			files[k] = abi.AppendDevEvent(files[k], e.DevEvent)
			counts[k]++
		}
	}
	for k, body := range files {
		b := make([]byte, eventLogHeader, eventLogHeader+len(body))
		copy(b, eventLogMagic)
		binary.LittleEndian.PutUint32(b[8:], uint32(k.dev))
		binary.LittleEndian.PutUint32(b[12:], uint32(k.comm))
		binary.LittleEndian.PutUint64(b[16:], counts[k])
		name := filepath.Join(dir, fmt.Sprintf("events-dev%d-comm%d.bin", k.dev, k.comm))
		if err := os.WriteFile(name, append(b, body...), 0o644); err != nil {
			return fmt.Errorf("harness: event log: %w", err)
		}
	}
	return nil
}

// ReadEventLogs reads every event log in dir: the events by device (with
// their communicator index) and the count per device.
func ReadEventLogs(dir string) (map[int][]Event, map[int]uint64, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("harness: event logs: %w", err)
	}
	logs, emitted := map[int][]Event{}, map[int]uint64{}
	for _, e := range entries {
		m := eventLogName.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		path := filepath.Join(dir, e.Name())
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, nil, fmt.Errorf("harness: event log: %w", err)
		}
		if len(b) < eventLogHeader || string(b[:8]) != eventLogMagic {
			return nil, nil, fmt.Errorf("harness: %s is not an event log (magic %q)", path, eventLogMagic)
		}
		dev, comm := int(binary.LittleEndian.Uint32(b[8:])), int(binary.LittleEndian.Uint32(b[12:]))
		n := binary.LittleEndian.Uint64(b[16:])
		if d, _ := strconv.Atoi(m[1]); d != dev {
			return nil, nil, fmt.Errorf("harness: %s says device %d", path, dev)
		}
		if k, _ := strconv.Atoi(m[2]); k != comm {
			return nil, nil, fmt.Errorf("harness: %s says communicator %d", path, comm)
		}
		if uint64(len(b)-eventLogHeader) != n*abi.DevEventSize {
			return nil, nil, fmt.Errorf("harness: %s: %d bytes of events for a count of %d", path, len(b)-eventLogHeader, n)
		}
		for p := eventLogHeader; p < len(b); p += abi.DevEventSize {
			logs[dev] = append(logs[dev], Event{abi.DecodeDevEvent(b[p:]), comm})
		}
		emitted[dev] += n
	}
	return logs, emitted, nil
}

// OutputFile is the plugin's JSON lines file of process pid in dir.
func OutputFile(dir string, pid int) (string, error) {
	// The plugin never reuses a file: when its name is taken it writes
	// ncclhooks-<host>-<pid>.<n>.jsonl; the newest is this run's.
	var m []string
	var err error
	for _, base := range schema.OutputSuffixes {
		for _, pat := range []string{fmt.Sprintf("ncclhooks-*-%d%s", pid, base), fmt.Sprintf("ncclhooks-*-%d.*%s", pid, base)} {
			found, gerr := filepath.Glob(filepath.Join(dir, pat))
			if gerr != nil {
				err = gerr
			}
			m = append(m, found...)
		}
	}
	if err != nil || len(m) == 0 {
		return "", fmt.Errorf("harness: the plugin wrote no output file for pid %d in %s", pid, dir)
	}
	best, bestT := m[0], time.Time{}
	for _, p := range m {
		if st, err := os.Stat(p); err == nil && st.ModTime().After(bestT) {
			best, bestT = p, st.ModTime()
		}
	}
	return best, nil
}
