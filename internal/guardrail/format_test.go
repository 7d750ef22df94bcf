package guardrail

import (
	"testing"
	"time"
)

func TestFormat(t *testing.T) {
	for _, c := range []struct {
		got, want string
	}{
		{formatBytes(712 << 20), "712 MiB"},
		{formatBytes(100 << 20), "100 MiB"},
		{formatBytes(11.14 * (1 << 30)), "11.1 GiB"},
		{formatBytes(12 << 30), "12 GiB"},
		{formatBytes(1.5 * (1 << 30)), "1.5 GiB"},
		{formatBytes(512), "512 B"},
		{formatBytes(1023.9 * (1 << 20)), "1024 MiB"},
		{formatPercent(0.9), "90%"},
		{formatPercent(0.9254), "92.5%"},
		{formatDuration(45 * time.Second), "45s"},
		{formatDuration(9*time.Minute + 20*time.Second), "9m"},
		{formatDuration(65 * time.Minute), "1h5m"},
		{formatDuration(2 * time.Hour), "2h"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}
