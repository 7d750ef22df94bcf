package metrics

import "time"

// WithClock sets the clock whose time each Sample queries at (instead of
// time.Now), so a test can query a past instant of backfilled data.
func WithClock(now func() time.Time) PrometheusOption {
	return func(p *prometheusProvider) { p.now = now }
}
