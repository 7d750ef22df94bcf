package engine

import (
	"fmt"
	"strings"
	"testing"
	"time"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
	"perfexp.dev/perf-operator/internal/metrics"
)

// A window of exactly the length admission asks for (MinMeasuredWindow) keeps
// the samples its analysis needs when each sample's CPU is a Prometheus rate
// over RateRange: 4 per sequential window, one per interleaved sub-window or
// sweep stage, at every interval, window phase and with reconciles that come
// late. Before the rule, admission took 2m windows at 15s, which kept 3
// samples, and 1m interleaved sub-windows, which kept none: every such run
// ended with its analysis incomplete.
func TestMinMeasuredWindowHoldsItsSamples(t *testing.T) {
	designs := []struct {
		name string
		exp  func() *perfv1.PerfExperiment
		need int32
	}{
		{"sequential", seedExperiment, perfv1.MinWindowSamples},
		{"interleaved", interleavedExperiment, 1},
		{"sweep", func() *perfv1.PerfExperiment {
			return sweepExperiment(perfv1.StageSpec{QPS: 100}, perfv1.StageSpec{QPS: 200})
		}, 1},
	}
	intervals := []time.Duration{5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second, time.Minute, 2 * time.Minute}
	for _, d := range designs {
		for _, iv := range intervals {
			for _, phase := range []time.Duration{0, iv / 4, iv / 2, 3 * iv / 4, iv - time.Second} {
				for _, late := range []time.Duration{0, 100 * time.Millisecond, 400 * time.Millisecond} {
					e := d.exp()
					e.Spec.Metrics.Interval = perfv1.Duration(iv.String())
					e.Spec.Metrics.Prometheus = &perfv1.PrometheusSpec{URL: "http://prometheus:9090"}
					least, _ := e.Spec.MinMeasuredWindow(iv)
					e.Spec.Windows.Baseline = perfv1.Duration(least.String())
					if e.Spec.HasToggle() {
						e.Spec.Windows.Treatment = perfv1.Duration(least.String())
					}
					name := fmt.Sprintf("%s %s window %s fetch phase %s late %s", d.name, iv, least, phase, late)
					w := newWorld(t, e)
					w.cpuWindow, w.fetchEvery, w.fetchPhase = perfv1.RateRange(iv), iv+late, phase
					w.runToEnd()
					st := &w.exp.Status
					if st.Phase != perfv1.PhaseSucceeded {
						t.Errorf("%s: phase %s, abort %+v", name, st.Phase, st.Abort)
						continue
					}
					measured := 0
					for _, win := range st.Windows {
						if win.Variant != perfv1.VariantBaseline && win.Variant != perfv1.VariantTreatment {
							continue
						}
						measured++
						if win.Series == nil || win.Series.Points < d.need {
							t.Errorf("%s: window %d/%s round %v kept %+v; want at least %d points", name, win.Stage, win.Variant, win.Round, win.Series, d.need)
						}
					}
					if measured == 0 {
						t.Errorf("%s: no measured window", name)
					}
					for _, row := range st.Summary {
						if !row.Trustworthy {
							t.Errorf("%s: stage %s untrustworthy", name, row.Stage)
						}
					}
				}
			}
		}
	}
}

// metrics-server averages each sample's CPU over its own resolution, which
// admission cannot know (it asks for 4 intervals): a run whose windows cannot
// keep the samples their analysis needs with the period its answers show ends
// at its first sample, before the toggle was ever applied, naming the window,
// instead of running its whole length to an incomplete analysis. Windows that
// can keep them run.
func TestWindowsTooShortForTheSourceEndBeforeTheToggle(t *testing.T) {
	for _, c := range []struct {
		window, interval string
		averaging        time.Duration
		fails            bool
	}{
		// 1m − 15s lead-in − 15s period leaves room for 3 samples at most.
		{"1m", "15s", 15 * time.Second, true},
		{"2m", "15s", 15 * time.Second, false},
		// A 30s resolution sampled every 10s: 10 + 30 + 3 × 10 = 70s at least.
		{"1m", "10s", 30 * time.Second, true},
		{"80s", "10s", 30 * time.Second, false},
	} {
		e := seedExperiment()
		e.Spec.Metrics = perfv1.MetricsSpec{Source: perfv1.MetricsSourceMetricsServer, Interval: perfv1.Duration(c.interval)}
		e.Spec.Warmup = nil // the first sample comes in the first baseline
		e.Spec.Windows = perfv1.WindowsSpec{Baseline: perfv1.Duration(c.window), Treatment: perfv1.Duration(c.window), Settle: "0s"}
		e.Default()
		if errs := e.Validate(); len(errs) > 0 {
			t.Fatalf("%s at %s: admission refuses it (%v); the case is for what admission cannot know", c.window, c.interval, errs)
		}
		w := newWorld(t, e)
		w.cpuWindow = c.averaging
		w.runToEnd()
		st := &w.exp.Status
		name := fmt.Sprintf("%s windows at %s, metrics-server averaging %s", c.window, c.interval, c.averaging)
		if !c.fails {
			if st.Phase != perfv1.PhaseSucceeded {
				t.Errorf("%s: phase %s, abort %+v; want it to run", name, st.Phase, st.Abort)
			}
			continue
		}
		if st.Phase != perfv1.PhaseFailed || st.Abort == nil || st.Abort.Reason != perfv1.ReasonInvalidSpec ||
			!strings.Contains(st.Abort.Message, "spec.windows.baseline") || !strings.Contains(st.Abort.Message, "nothing was changed") {
			t.Errorf("%s: phase %s, abort %+v; want Failed, InvalidSpec naming spec.windows.baseline", name, st.Phase, st.Abort)
		}
		// (The closing revert runs as after any failure with the lock held:
		// it restores the recorded original, which nothing changed.)
		if w.applies != 0 || w.applied || w.heldBy != "" || len(w.jobs) != 0 {
			t.Errorf("%s: %d applies, applied %v, lock %q, Jobs %d left; want nothing changed and everything released", name, w.applies, w.applied, w.heldBy, len(w.jobs))
		}
		if n := len(st.Windows); n == 0 || st.Windows[n-1].Variant == perfv1.VariantTreatment {
			t.Errorf("%s: ended in window %d; want before any treatment", name, n)
		}
	}
}

// Only the run's first answer decides: a later one that spans a missed
// scrape reports twice the resolution, and a run that keeps its samples goes
// on (2-minute windows at 15 s with a 15 s resolution, where one answer in
// the baseline reports 90 s).
func TestOneLongSourceWindowLaterDoesNotEndTheRun(t *testing.T) {
	e := seedExperiment()
	e.Spec.Metrics = perfv1.MetricsSpec{Source: perfv1.MetricsSourceMetricsServer, Interval: "15s"}
	e.Spec.Windows = perfv1.WindowsSpec{Baseline: "2m", Treatment: "2m", Settle: "0s"}
	w := newWorld(t, e)
	w.cpuWindow = 15 * time.Second
	samples := 0
	w.metricsFault = func(w *world, got []metrics.Sample) ([]metrics.Sample, string) {
		samples++
		if samples == 3 {
			for i := range got {
				got[i].Window = 90 * time.Second
			}
		}
		return got, ""
	}
	w.runToEnd()
	if st := &w.exp.Status; st.Phase != perfv1.PhaseSucceeded {
		t.Fatalf("phase %s, abort %+v; want the run to go on", st.Phase, st.Abort)
	}
	if samples < 3 {
		t.Fatalf("only %d samples taken", samples)
	}
}
