package v1alpha1

import (
	"testing"
	"time"
)

func TestRateRange(t *testing.T) {
	for _, tc := range []struct{ in, want time.Duration }{
		{0, time.Minute},
		{15 * time.Second, time.Minute},
		{time.Minute, time.Minute},
		{90 * time.Second, 90 * time.Second},
		{90*time.Second + time.Millisecond, 91 * time.Second},
		{5 * time.Minute, 5 * time.Minute},
	} {
		if got := RateRange(tc.in); got != tc.want {
			t.Errorf("RateRange(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}
