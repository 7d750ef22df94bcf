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
// due to change within the next interval anyway: then they wait for that
// write, one interval at most.
func TestSamplesWaitForAChangeDueWithinAnInterval(t *testing.T) {
	now := time.Date(2026, 11, 28, 1, 0, 0, 0, time.UTC)
	spec := &perfv1.PerfExperimentSpec{Metrics: perfv1.MetricsSpec{Interval: "15s"}}
	st := &perfv1.PerfExperimentStatus{Phase: perfv1.PhaseBaseline}
	moved := st.DeepCopy()
	moved.Measurement = &perfv1.MeasurementStatus{LastSampleTime: &metav1.Time{Time: now}}
	full := &pending{samples: []metrics.Sample{{Time: now, Pod: "a"}}, unflushed: FlushEvery}

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
		{"the window's end has passed (a late Job): written", now.Add(-time.Second), full, moved, true},
		{"fewer than FlushEvery samples: waits", time.Time{}, &pending{samples: full.samples, unflushed: FlushEvery - 1}, moved, false},
		{"a failure waits: written", now.Add(10 * time.Second), &pending{samples: full.samples, failures: []engine.SampleFailure{{Time: now}}, unflushed: 1}, moved, true},
		{"more than samples changed: written", now.Add(10 * time.Second), &pending{samples: full.samples, unflushed: 1}, &perfv1.PerfExperimentStatus{Phase: perfv1.PhaseTreatment}, true},
	} {
		soon := changeSoon(spec, engine.Decision{ChangesAt: c.changesAt}, now)
		if got := flushDue(st, c.after, c.p, soon); got != c.want {
			t.Errorf("%s: flushDue %v, want %v", c.name, got, c.want)
		}
	}
}
