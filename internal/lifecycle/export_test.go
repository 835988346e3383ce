package lifecycle

import (
	"github.com/ncclhooks/ncclhooks/internal/backend"
	"github.com/ncclhooks/ncclhooks/internal/sinks"
)

// DeviceState is what the drainer writes in a device's device lines.
func (s *Session) DeviceState(d backend.Device) sinks.DeviceState { return s.deviceState(d) }
