package v1alpha1

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
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
	leadIn, samples := s.windowNeed(interval)
	need := leadIn + rng + time.Duration(samples+1)*interval
	if need <= least {
		return least, why
	}
	return need, fmt.Sprintf("with Prometheus a sample's CPU is a rate over %s and counts only once that range lies %s; %s and an interval of margin take %s at a %s interval",
		rng, s.windowPlace(), s.samplesText(samples), need, interval)
}

// windowNeed is how long a measured window leaves out at its start (a
// sequential window's first interval, while k6 starts; nothing for an
// interleaved sub-window, whose settle runs under load) and how many samples
// it must keep: MinWindowSamples for a comparison, one for an interleaved
// round's sub-window or a load-only sweep's stage (its mean).
func (s *PerfExperimentSpec) windowNeed(interval time.Duration) (leadIn time.Duration, samples int) {
	switch {
	case s.Interleaved():
		return 0, 1
	case s.Toggle != nil || len(s.Variants) > 0 || s.Calibrate:
		return interval, MinWindowSamples
	default:
		return interval, 1
	}
}

func (s *PerfExperimentSpec) windowPlace() string {
	if s.Interleaved() {
		return "inside the round's sub-window"
	}
	return "inside the window after its first interval"
}

func (s *PerfExperimentSpec) samplesText(n int) string {
	if n == 1 {
		return "one sample"
	}
	return fmt.Sprintf("%d samples", n)
}

// WindowsKeepSamples checks the windows against the metrics source's
// averaging period once its answers say what it is (each sample's window:
// metrics-server's resolution, or the rate range): it refuses a window that
// cannot keep the samples its analysis needs at any phase of the sampling,
// leadIn + averaging + (samples−1) intervals longer than the window.
// Admission checks the same with a margin where the period is known from the
// spec (MinMeasuredWindow, Prometheus); metrics-server's is not.
func (s *PerfExperimentSpec) WindowsKeepSamples(interval, averaging time.Duration) field.ErrorList {
	if interval <= 0 || averaging <= 0 {
		return nil
	}
	leadIn, samples := s.windowNeed(interval)
	var errs field.ErrorList
	for _, w := range []struct {
		name string
		d    Duration
	}{{"baseline", s.Windows.Baseline}, {"treatment", s.Windows.Treatment}} {
		v, err := w.d.Parse()
		if err != nil || v <= 0 || (w.name == "treatment" && !s.HasToggle()) {
			continue
		}
		if leadIn+averaging+time.Duration(samples-1)*interval > v {
			errs = append(errs, field.Invalid(field.NewPath("spec", "windows", w.name), w.d,
				fmt.Sprintf("keeps fewer than %s: the metrics source averages each sample's CPU over %s, and a sample counts only once that period lies %s; at a %s interval that takes at least %s",
					s.samplesText(samples), averaging, s.windowPlace(), interval, leadIn+averaging+time.Duration(samples+1)*interval)))
		}
	}
	return errs
}
