package engine

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
	"perfexp.dev/perf-operator/internal/k6"
)

func interleavedExperiment() *perfv1.PerfExperiment {
	e := seedExperiment()
	e.Spec.Design = perfv1.DesignInterleaved
	e.Spec.Interleaving = &perfv1.InterleavingSpec{Rounds: 4}
	e.Spec.Metrics.Interval = "15s"
	e.Spec.Windows = perfv1.WindowsSpec{Baseline: "2m", Treatment: "2m", Settle: "30s"}
	return e
}

// arms is a stage's arm sequence from the recorded orders, as "ABBAABBA".
func arms(st *perfv1.PerfExperimentStatus, stage int32) string {
	var b strings.Builder
	for _, r := range st.Interleaving.Rounds {
		if r.Stage == stage {
			b.WriteString(r.Order)
		}
	}
	return b.String()
}

// switchesOn counts the A→B edges of an arm sequence that starts with the
// toggle off.
func switchesOn(seq string) int {
	n, prev := 0, 'A'
	for _, c := range seq {
		if c == 'B' && prev == 'A' {
			n++
		}
		prev = c
	}
	return n
}

func TestInterleavedRunRecordsEveryRound(t *testing.T) {
	w := newWorld(t, interleavedExperiment())
	w.runToEnd()
	st := &w.exp.Status
	if st.Phase != perfv1.PhaseSucceeded {
		t.Fatalf("phase %s: %+v", st.Phase, st.Abort)
	}
	if st.Interleaving == nil || len(st.Interleaving.Rounds) != 12 {
		t.Fatalf("interleaving %+v; want 12 rounds", st.Interleaving)
	}
	wantApplies := 0
	for s := int32(0); s < 3; s++ {
		seq := arms(st, s)
		// abba: the rounds alternate, so every two rounds hold ABBA or BAAB.
		if seq[0:2] == seq[2:4] || seq[0] == seq[1] {
			t.Errorf("stage %d orders %s do not alternate", s, seq)
		}
		wantApplies += switchesOn(seq)
		job := k6.JobName(w.exp.Name, k6.Window{Stage: s, Variant: perfv1.VariantRounds})
		if w.created[job] != 1 {
			t.Errorf("stage %d: Job %s created %d times; want once (one continuous load)", s, job, w.created[job])
		}
		for r := int32(0); r < 4; r++ {
			for _, v := range []perfv1.Variant{perfv1.VariantBaseline, perfv1.VariantTreatment} {
				n := 0
				for _, win := range st.Windows {
					if win.Stage == s && win.Variant == v && win.Round != nil && *win.Round == r {
						n++
						if win.Valid == nil || !*win.Valid || win.Job != job || win.Series == nil || win.Series.Points < 6 {
							t.Errorf("stage %d round %d %s: %+v", s, r, v, win)
						}
						if d := win.End.Sub(win.Start.Time); d.Minutes() != 2 {
							t.Errorf("stage %d round %d %s lasted %s", s, r, v, d)
						}
					}
				}
				if n != 1 {
					t.Errorf("stage %d round %d %s recorded %d times", s, r, v, n)
				}
			}
		}
	}
	if w.applies != wantApplies {
		t.Errorf("%d applies; the orders need %d", w.applies, wantApplies)
	}
	if len(st.Summary) != 3 {
		t.Fatalf("summary %+v", st.Summary)
	}
	for _, row := range st.Summary {
		c := row.CPU
		if c == nil || c.Rounds != 4 || math.Abs(c.Overhead-0.05) > 1e-3 || !c.Significant || !row.Trustworthy {
			t.Errorf("stage %s cpu %+v trustworthy %v", row.Stage, c, row.Trustworthy)
		}
	}
	if w.applied {
		t.Error("toggle left on")
	}
}

// TestInterleavedCalibrationNeverSwitches: an A/A run measures both arms
// untouched and finds nothing.
func TestInterleavedCalibrationNeverSwitches(t *testing.T) {
	e := interleavedExperiment()
	e.Spec.Calibrate = true
	w := newWorld(t, e)
	w.runToEnd()
	st := &w.exp.Status
	if st.Phase != perfv1.PhaseSucceeded || w.applies != 0 {
		t.Fatalf("phase %s, %d applies", st.Phase, w.applies)
	}
	for _, row := range st.Summary {
		if c := row.CPU; c == nil || c.Overhead != 0 || c.Significant {
			t.Errorf("stage %s cpu %+v", row.Stage, c)
		}
	}
	if st.Verdict != perfv1.VerdictNoEffect {
		t.Errorf("verdict %s", st.Verdict)
	}
}

// TestInterleavedLostStatusWritesNeitherRepeatNorLose drops the status write of
// every decision in turn (a crash between the actions and the write): every
// sub-window is still recorded exactly once and no Job runs twice.
func TestInterleavedLostStatusWritesNeitherRepeatNorLose(t *testing.T) {
	clean := newWorld(t, interleavedExperiment())
	clean.runToEnd()
	for k := 2; k < clean.decisions; k++ {
		t.Run(fmt.Sprint(k), func(t *testing.T) {
			w := newWorld(t, interleavedExperiment())
			w.loseStatusAt = k
			w.runToEnd()
			st := &w.exp.Status
			if st.Phase != perfv1.PhaseSucceeded {
				t.Fatalf("phase %s: %+v", st.Phase, st.Abort)
			}
			seen := map[string]int{}
			valid := map[int32]int{}
			for _, win := range st.Windows {
				if win.Round == nil {
					continue
				}
				seen[fmt.Sprintf("%d/%d/%s", win.Stage, *win.Round, win.Variant)]++
				if win.Valid != nil && *win.Valid {
					valid[win.Stage]++
				}
			}
			if len(seen) != 24 {
				t.Errorf("%d sub-windows recorded; want 24", len(seen))
			}
			for key, n := range seen {
				if n != 1 {
					t.Errorf("sub-window %s recorded %d times", key, n)
				}
			}
			for s := int32(0); s < 3; s++ {
				if valid[s] < 6 {
					t.Errorf("stage %d: %d valid sub-windows of 8", s, valid[s])
				}
			}
			for name, n := range w.created {
				if n != 1 {
					t.Errorf("Job %s created %d times", name, n)
				}
			}
			if w.applied || w.heldBy != "" {
				t.Errorf("applied %v, held by %q", w.applied, w.heldBy)
			}
		})
	}
}

func TestNoiseFloorNamesTheWidestStage(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	stages := []perfv1.StageSummary{
		{CPU: &perfv1.MetricComparison{MDE: f(0.021)}, Memory: &perfv1.MetricComparison{MDE: f(0.004), Significant: true}},
		{CPU: &perfv1.MetricComparison{MDE: f(0.031)}, Memory: &perfv1.MetricComparison{}},
	}
	if got, want := noiseFloor(stages), "CPU ±3.1 %, memory ±0.4 %"; got != want {
		t.Errorf("noiseFloor %q; want %q", got, want)
	}
	if got := noiseFloor([]perfv1.StageSummary{{CPU: &perfv1.MetricComparison{}}}); got != "" {
		t.Errorf("noiseFloor without an MDE %q", got)
	}
	if f, n := significantRows(stages); f != 1 || n != 4 {
		t.Errorf("significantRows %d of %d; want 1 of 4", f, n)
	}
}

// TestInterleavedLatencyFromLiveHistograms: each sub-window's percentiles come
// from the difference of two live readings of the load's histogram, and the
// stage's p99 gets an interval over the rounds.
func TestInterleavedLatencyFromLiveHistograms(t *testing.T) {
	w := newWorld(t, interleavedExperiment())
	bucket := func(ms float64) int {
		h := k6.NewHistogram()
		h.Add(ms)
		return h.Buckets[0].Index
	}
	slow, fast := bucket(2.4), bucket(2.0)
	type cum struct {
		last     time.Duration
		requests int64
		buckets  map[int]int64
	}
	state := map[string]*cum{}
	w.live = func(w *world, win k6.Window, elapsed time.Duration) (k6.Live, bool) {
		key := fmt.Sprint(win.Stage, win.Variant)
		c := state[key]
		if c == nil {
			c = &cum{buckets: map[int]int64{}}
			state[key] = c
		}
		n := int64(float64(win.QPS) * (elapsed - c.last).Seconds())
		c.last = elapsed
		b := fast
		if w.applied {
			b = slow
		}
		c.requests += n
		c.buckets[b] += n
		out := map[int]int64{}
		for i, v := range c.buckets {
			out[i] = v
		}
		return k6.Live{Requests: c.requests, Buckets: out}, true
	}
	w.runToEnd()
	st := &w.exp.Status
	if st.Phase != perfv1.PhaseSucceeded {
		t.Fatalf("phase %s: %+v", st.Phase, st.Abort)
	}
	for _, win := range st.Windows {
		if win.Round == nil {
			continue
		}
		if win.LiveStart != nil || win.LiveEnd != nil {
			t.Errorf("closed sub-window keeps its readings: %+v", win)
		}
		want := 2.0
		if win.Variant == perfv1.VariantTreatment {
			want = 2.4
		}
		if l := win.Load; l == nil || math.Abs(l.P99Ms-want)/want > 0.01 || l.Requests < int64(win.QPS)*90 || math.Abs(l.AchievedQPS-float64(win.QPS)) > 1 {
			t.Errorf("stage %d round %d %s: load %+v; want p99 ≈ %.1f ms", win.Stage, *win.Round, win.Variant, win.Load, want)
		}
	}
	for _, row := range st.Summary {
		if c := row.P99; c == nil || c.Rounds != 4 || math.Abs(c.Overhead-0.2) > 0.02 || !c.Significant {
			t.Errorf("stage %s p99 %+v", row.Stage, c)
		}
	}
}
