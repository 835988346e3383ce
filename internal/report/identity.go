package report

// Who a work item belongs to: its process (a file), its GPU and its
// communicator, from the header, device and comm lines.

import (
	"fmt"

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
