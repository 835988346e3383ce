package harness

import (
	"bufio"
	"encoding/json"
	"fmt"
	"time"

	"github.com/ncclhooks/ncclhooks/internal/schema"
)

// ReloadTime is when a live reload's profile epoch began, from an output:
// the file change that caused it, the switch to its hooks, and the first
// record of its hooks (the earliest recorded timestamp field, on the host's
// clock through the device's clock line).
type ReloadTime struct {
	Epoch       int
	Profile     string
	Hash        string
	Change      time.Time // the profile file's modification time
	Active      time.Time // the switch's stores done
	FirstRecord time.Time // zero: no record of the epoch has a timestamp field
	Hook        string    // whose record was first
}

// ToActive and ToFirstRecord are the latencies from the file change.
func (r ReloadTime) ToActive() time.Duration { return r.Active.Sub(r.Change) }
func (r ReloadTime) ToFirstRecord() time.Duration {
	if r.FirstRecord.IsZero() {
		return -1
	}
	return r.FirstRecord.Sub(r.Change)
}

func (r ReloadTime) String() string {
	first := "no timestamped record"
	if !r.FirstRecord.IsZero() {
		first = fmt.Sprintf("first record (%s) %.3f ms after it", r.Hook, float64(r.ToFirstRecord().Microseconds())/1000)
	}
	return fmt.Sprintf("epoch %d, profile %q (sha256 %.12s): active %.3f ms after the file change, %s",
		r.Epoch, r.Profile, r.Hash, float64(r.ToActive().Microseconds())/1000, first)
}

// ReloadTimes reads the profile epochs of an output and when each began.
func ReloadTimes(file string) ([]ReloadTime, error) {
	f, err := schema.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	type clock struct{ host, dev uint64 }
	clocks := map[int]clock{}
	var out []ReloadTime
	var fields map[string]map[string]string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for line := 1; sc.Scan(); line++ {
		var head lineHead
		if err := json.Unmarshal(sc.Bytes(), &head); err != nil {
			return nil, fmt.Errorf("%s:%d: %v", file, line, err)
		}
		switch head.Type {
		case schema.TypeClock:
			var c schema.Clock
			json.Unmarshal(sc.Bytes(), &c)
			clocks[c.Device] = clock{c.HostUnixNs, c.DeviceNs}
		case schema.TypeProfile:
			var p schema.Profile
			if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
				return nil, fmt.Errorf("%s:%d: %v", file, line, err)
			}
			fields = p.Fields
			out = append(out, ReloadTime{Epoch: p.Epoch, Profile: p.Profile, Hash: p.ProfileHash,
				Change: time.Unix(0, p.ChangeUnixNs), Active: time.Unix(0, p.ActiveUnixNs)})
		case schema.TypeRecord:
			if len(out) == 0 {
				continue
			}
			var rec map[string]json.RawMessage
			if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
				return nil, fmt.Errorf("%s:%d: %v", file, line, err)
			}
			cur := &out[len(out)-1]
			for name, src := range fields[head.Hook] {
				if src != "timestamp" {
					continue
				}
				var v uint64
				if json.Unmarshal(rec[name], &v) != nil {
					continue
				}
				c, ok := clocks[head.Device]
				if !ok {
					c = clock{v, v}
				}
				t := time.Unix(0, int64(v-c.dev+c.host))
				if cur.FirstRecord.IsZero() || t.Before(cur.FirstRecord) {
					cur.FirstRecord, cur.Hook = t, head.Hook
				}
			}
		}
	}
	return out, sc.Err()
}
