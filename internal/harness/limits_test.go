package harness

import (
	"strings"
	"testing"
)

// Defaults fills zero fields only: a negative value stays for Validate to
// refuse, with its range (issue 34.3).
func TestValidateRefusesWhatDefaultsLeave(t *testing.T) {
	var c Config
	c.Defaults()
	if err := c.Validate(); err != nil {
		t.Fatalf("the defaults: %v", err)
	}
	bad := c
	bad.Items, bad.Channels = -5, MaxChannels+1
	bad.Defaults()
	err := bad.Validate()
	if err == nil || !strings.Contains(err.Error(), "items -5: allowed 1 to") || !strings.Contains(err.Error(), "channels 65: allowed 1 to 64") {
		t.Errorf("items -5, channels 65: %v", err)
	}
	if err := (Config{}).Validate(); err == nil || !strings.Contains(err.Error(), "devices 0: allowed 1 to") {
		t.Errorf("a zero Config, not defaulted: %v", err)
	}
	many := c
	many.Devices, many.CommsPerDevice, many.Channels = 2, 64, 64
	if err := many.Validate(); err == nil || !strings.Contains(err.Error(), "at most 4096") {
		t.Errorf("8192 cpu threads: %v", err)
	}
	many.Backend = "gpu" // blocks, not threads
	if err := many.Validate(); err != nil {
		t.Errorf("gpu: %v", err)
	}
}
