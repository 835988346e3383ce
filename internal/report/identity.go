package report

// Who a work item belongs to: its process (a file), its GPU and its
// communicator, from the header, device and comm lines.

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/ncclhooks/ncclhooks/internal/schema"
)

// Process names a file's process: "host pid N".
func (r *Run) Process(file int) string {
	h := r.Files[file].Header
	return fmt.Sprintf("%s pid %d", h.Host, h.PID)
}

// DeviceKey tells a file's device apart from every other device of the run:
// the GPU's UUID, else the host, pid and ordinal (each process of a job sees
// its GPU as device 0).
func (r *Run) DeviceKey(file, device int) string {
	f := r.Files[file]
	uuid := ""
	if d := f.Devices[device]; d != nil {
		uuid = d.UUID
	}
	return schema.DeviceKey(uuid, f.Header.Host, f.Header.PID, device)
}

// DeviceLabel names a file's device for people: "GPU-8c1e... (NVIDIA H200,
// host pid 7 device 0)", or "host pid 7 device 0 (cpu: ...)" without a UUID.
func (r *Run) DeviceLabel(file, device int) string {
	f := r.Files[file]
	where := fmt.Sprintf("%s device %d", r.Process(file), device)
	d := f.Devices[device]
	name := ""
	if d != nil {
		name = d.Name
	} else if c, ok := f.Clocks[device]; ok {
		name = c.Model
	}
	switch {
	case d != nil && d.UUID != "":
		return fmt.Sprintf("%s (%s, %s)", d.UUID, name, where)
	case name != "":
		return fmt.Sprintf("%s (%s)", where, name)
	}
	return where
}

// Comm is the communicator a work item of a file's device belongs to: the
// one its recorded comm index names, or the device's only communicator when
// the hook does not record comm. ok is false when that does not say (the
// index has no comm line, or several communicators share the device). comm
// -1 means not recorded; below that, an aggregate's overflow key.
func (r *Run) Comm(file, device, comm int) (c schema.Comm, ok bool) {
	f := r.Files[file]
	switch {
	case comm >= 0:
		c, ok = f.Comms[[2]int{device, comm}]
		return c, ok
	case comm < -1: // an aggregate's overflow key: no one communicator
		return c, false
	}
	n := 0
	for k, cc := range f.Comms {
		if k[0] == device {
			c, n = cc, n+1
		}
	}
	return c, n == 1
}

// DeviceComms are the comm lines of a file's device, by comm_id.
func (r *Run) DeviceComms(file, device int) []schema.Comm {
	var cs []schema.Comm
	for k, c := range r.Files[file].Comms {
		if k[0] == device {
			cs = append(cs, c)
		}
	}
	slices.SortFunc(cs, func(a, b schema.Comm) int {
		return cmp.Or(cmp.Compare(a.CommID, b.CommID), cmp.Compare(a.Comm, b.Comm))
	})
	return cs
}

// RankKey names a file's device by its ranks: "0xab rank 2", or with
// several communicators "0xab,0xcd rank 2" (the same rank in each) or
// "0xab rank 2,0xcd rank 0". A rank is a device's place in its
// communicators, not one communicator's: the device's aggregates, which all
// its communicators add up, then belong to it too. ok is false when the
// device has no comm line.
func (r *Run) RankKey(file, device int) (key, label string, ok bool) {
	cs := r.DeviceComms(file, device)
	if len(cs) == 0 {
		return "", "", false
	}
	var ids, each, eachLabel []string
	same := true
	for _, c := range cs {
		ids = append(ids, c.CommID)
		each = append(each, fmt.Sprintf("%s rank %d", c.CommID, c.Rank))
		eachLabel = append(eachLabel, fmt.Sprintf("rank %d/%d of %s", c.Rank, c.NRanks, c.CommID))
		same = same && c.Rank == cs[0].Rank && c.NRanks == cs[0].NRanks
	}
	where := r.DeviceLabel(file, device)
	if same {
		word := "comm"
		if len(cs) > 1 {
			word = "comms"
		}
		return fmt.Sprintf("%s rank %d", strings.Join(ids, ","), cs[0].Rank),
			fmt.Sprintf("rank %d/%d of %s %s (%s)", cs[0].Rank, cs[0].NRanks, word, strings.Join(ids, ","), where), true
	}
	return strings.Join(each, ","), strings.Join(eachLabel, ", ") + " (" + where + ")", true
}

// compareGroups orders group keys: rank keys by their (first) rank, then
// as compareKeys does.
func compareGroups(a, b string) int {
	ra, okA := keyRank(a)
	rb, okB := keyRank(b)
	if okA && okB && ra != rb {
		return cmp.Compare(ra, rb)
	}
	return compareKeys(a, b)
}

// keyRank is the first rank a RankKey names.
func keyRank(key string) (int, bool) {
	_, rest, ok := strings.Cut(key, " rank ")
	if !ok {
		return 0, false
	}
	rest, _, _ = strings.Cut(rest, ",")
	n, err := strconv.Atoi(rest)
	return n, err == nil
}
