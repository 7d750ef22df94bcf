package controllers

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
	"perfexp.dev/perf-operator/internal/engine"
	"perfexp.dev/perf-operator/internal/metrics"
)

// Samples alone are written every FlushEvery samples, unless the status is
// due to change within an interval anyway: then they wait for that write, two
// intervals at most.
func TestSamplesWaitForAChangeDueWithinAnInterval(t *testing.T) {
	now := time.Date(2026, 11, 28, 1, 0, 0, 0, time.UTC)
	spec := &perfv1.PerfExperimentSpec{Metrics: perfv1.MetricsSpec{Interval: "15s"}}
	st := &perfv1.PerfExperimentStatus{Phase: perfv1.PhaseBaseline}
	moved := st.DeepCopy()
	moved.Measurement = &perfv1.MeasurementStatus{LastSampleTime: &metav1.Time{Time: now}}
	full := &pending{samples: []metrics.Sample{{Time: now, Pod: "a"}}, unflushed: FlushEvery}

	withMetrics := func(st *perfv1.PerfExperimentStatus, s metav1.ConditionStatus) *perfv1.PerfExperimentStatus {
		out := st.DeepCopy()
		out.Conditions = append(out.Conditions, metav1.Condition{Type: perfv1.ConditionMetricsAvailable, Status: s, Reason: "R", Message: "m"})
		return out
	}
	for _, c := range []struct {
		name      string
		changesAt time.Time
		p         *pending
		after     *perfv1.PerfExperimentStatus
		want      bool
	}{
		{"nothing scheduled: written", time.Time{}, full, moved, true},
		{"the window ends in 10 s: waits", now.Add(10 * time.Second), full, moved, false},
		{"the window ends in exactly an interval: waits", now.Add(15 * time.Second), full, moved, false},
		{"the window ends in 20 s: written", now.Add(20 * time.Second), full, moved, true},
		{"the window's end passed a second ago, its Job's completion not seen yet: waits", now.Add(-time.Second), full, moved, false},
		{"the window's end passed more than an interval ago (a late Job): written", now.Add(-20 * time.Second), full, moved, true},
		{"fewer than FlushEvery samples: waits", time.Time{}, &pending{samples: full.samples, unflushed: FlushEvery - 1}, moved, false},
		{"a failure waits: written", now.Add(10 * time.Second), &pending{samples: full.samples, failures: []engine.SampleFailure{{Time: now}}, unflushed: 1}, moved, true},
		{"more than samples changed: written", now.Add(10 * time.Second), &pending{samples: full.samples, unflushed: 1}, &perfv1.PerfExperimentStatus{Phase: perfv1.PhaseTreatment}, true},
		{"the first sample's MetricsAvailable=True waits with it", time.Time{}, &pending{samples: full.samples, unflushed: 1}, withMetrics(moved, metav1.ConditionTrue), false},
		{"MetricsAvailable=False is written at once", time.Time{}, &pending{samples: full.samples, unflushed: 1}, withMetrics(moved, metav1.ConditionFalse), true},
	} {
		soon := changeSoon(spec, engine.Decision{ChangesAt: c.changesAt}, now)
		if got := flushDue(st, c.after, c.p, soon); got != c.want {
			t.Errorf("%s: flushDue %v, want %v", c.name, got, c.want)
		}
	}
}

// A MetricsAvailable condition that flips, as after an outage, is written at
// once; only its first appearance, True, waits with the samples.
func TestMetricsAvailableFlipIsWrittenAtOnce(t *testing.T) {
	cond := func(s metav1.ConditionStatus) []metav1.Condition {
		return []metav1.Condition{{Type: perfv1.ConditionMetricsAvailable, Status: s, Reason: "R", Message: "m"}}
	}
	a := &perfv1.PerfExperimentStatus{Conditions: cond(metav1.ConditionFalse)}
	b := &perfv1.PerfExperimentStatus{Conditions: cond(metav1.ConditionTrue)}
	if equalButSamples(a, b) {
		t.Fatal("False to True taken for samples only")
	}
	if !equalButSamples(&perfv1.PerfExperimentStatus{}, b) {
		t.Fatal("the first True not taken for samples only")
	}
}
