package v1alpha1

import (
	"fmt"
	"time"
)

// MinRateRange is the shortest range of the Prometheus CPU query's rate:
// kube-prometheus-stack scrapes the kubelet's cAdvisor endpoint every 30s by
// default, and a rate needs two points.
const MinRateRange = time.Minute

// RateRange is the {{range}} of the Prometheus queries at a sampling interval:
// the interval itself, so that consecutive samples average adjacent,
// non-overlapping periods, but at least MinRateRange, rounded up to a whole
// second. Each sample's CPU is the average over that range before it.
func RateRange(interval time.Duration) time.Duration {
	r := max(interval, MinRateRange)
	return (r + time.Second - 1).Truncate(time.Second)
}

// MinWindowSamples is how many samples a sequential baseline or treatment
// window must keep for the comparison (the analysis' minimum).
const MinWindowSamples = 4

// MinMeasuredWindow is the shortest baseline or treatment window (for design
// interleaved, a round's sub-window) whose samples the analysis can use, and
// why. A sample counts for a window only when the period its CPU averages over
// lies inside the window after its lead-in (a sequential window's first
// interval, while k6 starts); samples averaged over the start still carry the
// load before it. So a window needs its lead-in, one averaging period and an
// interval per sample it must keep, plus one interval of margin for scrapes
// that come a little late:
//
//   - sequential, with a toggle, variants or a calibration: the lead-in, the period and
//     MinWindowSamples+1 intervals;
//   - a load-only sweep (its stages' means need one sample): the lead-in, the
//     period and 2 intervals;
//   - an interleaved sub-window (no lead-in: its settle runs under load; the
//     rounds need one sample each): the period and 2 intervals.
//
// With Prometheus (spec.metrics.prometheus set, source not metrics-server) the
// period is RateRange. metrics-server's period is its resolution, which the
// spec does not know: then the bound is MinWindowSamples intervals, the least
// that could work with a very short one. Never less than that either way.
func (s *PerfExperimentSpec) MinMeasuredWindow(interval time.Duration) (time.Duration, string) {
	least := MinWindowSamples * interval
	why := fmt.Sprintf("at least %d metrics.interval, or the window has too few samples to measure", MinWindowSamples)
	if s.Metrics.Prometheus == nil || s.Metrics.Source == MetricsSourceMetricsServer {
		return least, why
	}
	rng := RateRange(interval)
	var need time.Duration
	var what string
	switch {
	case s.Interleaved():
		need, what = rng+2*interval, "inside the round's sub-window; one sample"
	case s.Toggle != nil || len(s.Variants) > 0 || s.Calibrate:
		need, what = interval+rng+(MinWindowSamples+1)*interval, fmt.Sprintf("inside the window after its first interval; %d samples", MinWindowSamples)
	default:
		need, what = interval+rng+2*interval, "inside the window after its first interval; one sample"
	}
	if need <= least {
		return least, why
	}
	return need, fmt.Sprintf("with Prometheus a sample's CPU is a rate over %s and counts only once that range lies %s and an interval of margin take %s at a %s interval",
		rng, what, need, interval)
}
