package controllers

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
	"perfexp.dev/perf-operator/internal/metrics"
)

func TestOperatorMetricsCountWhatWasPersisted(t *testing.T) {
	key := types.NamespacedName{Namespace: "shop", Name: "m"}
	t0 := time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *metav1.Time { v := metav1.NewTime(t0.Add(d)); return &v }
	yes, no := true, false

	baseline := perfv1.PerfExperimentStatus{Phase: perfv1.PhaseBaseline, Toggle: &perfv1.ToggleStatus{},
		Windows: []perfv1.WindowStatus{{Variant: perfv1.VariantBaseline, Start: at(0)}}}
	recordWrite(key, &perfv1.PerfExperimentStatus{}, &baseline, 0)
	if got := testutil.ToFloat64(experimentsByPhase.WithLabelValues("Baseline")); got != 1 {
		t.Fatalf("Baseline gauge %v", got)
	}

	// The baseline window closes valid; the toggle goes on and two sample
	// instants after it are persisted.
	treat := baseline.DeepCopy()
	treat.Phase = perfv1.PhaseTreatment
	treat.Toggle.AppliedAt, treat.Toggle.Applied = at(time.Minute), true
	treat.Windows[0].End, treat.Windows[0].Valid = at(time.Minute), &yes
	treat.Windows[0].Load = &perfv1.LoadResult{P50Ms: 4, P95Ms: 9, P99Ms: 12.5}
	treat.Windows = append(treat.Windows, perfv1.WindowStatus{Variant: perfv1.VariantTreatment, Start: at(2 * time.Minute)})
	p := &pending{samples: []metrics.Sample{
		{Time: t0.Add(30 * time.Second), Pod: "a"},                                             // before the toggle
		{Time: t0.Add(75 * time.Second), Pod: "a"}, {Time: t0.Add(75 * time.Second), Pod: "b"}, // one instant, two pods
		{Time: t0.Add(90 * time.Second), Pod: "a"},
	}}
	evals := testutil.ToFloat64(guardrailEvaluations)
	recordWrite(key, &baseline, treat, judged(&baseline, treat, p))
	if got := testutil.ToFloat64(guardrailEvaluations) - evals; got != 2 {
		t.Fatalf("guardrail evaluations +%v; want 2 instants", got)
	}
	if testutil.ToFloat64(experimentsByPhase.WithLabelValues("Baseline")) != 0 ||
		testutil.ToFloat64(experimentsByPhase.WithLabelValues("Treatment")) != 1 {
		t.Fatal("phase gauge did not move")
	}
	if got := testutil.ToFloat64(windowsClosed.WithLabelValues("baseline", "true")); got != 1 {
		t.Fatalf("closed baseline windows %v", got)
	}
	if got := testutil.ToFloat64(toggleApplied.WithLabelValues("shop", "m")); got != 1 {
		t.Fatalf("toggle gauge %v while applied", got)
	}
	if got := testutil.ToFloat64(windowLatency.WithLabelValues("shop", "m", "0", "baseline", "0.99")); got != 0.0125 {
		t.Fatalf("baseline p99 gauge %v s; want 0.0125", got)
	}

	// A guardrail ends it; writing the same terminal status again counts nothing.
	aborted := treat.DeepCopy()
	aborted.Phase = perfv1.PhaseAborted
	aborted.Abort = &perfv1.AbortStatus{Reason: perfv1.ReasonHeapGrowth}
	aborted.Toggle.Applied = false
	aborted.Windows[1].End, aborted.Windows[1].Valid = at(3*time.Minute), &no
	recordWrite(key, treat, aborted, 0)
	recordWrite(key, aborted, aborted, 0)
	if got := testutil.ToFloat64(endings.WithLabelValues("Aborted", perfv1.ReasonHeapGrowth)); got != 1 {
		t.Fatalf("aborts by HeapGrowth %v", got)
	}
	if got := testutil.ToFloat64(windowsClosed.WithLabelValues("treatment", "false")); got != 1 {
		t.Fatalf("closed invalid treatment windows %v", got)
	}
	if got := testutil.ToFloat64(toggleApplied.WithLabelValues("shop", "m")); got != 0 {
		t.Fatalf("toggle gauge %v after the revert", got)
	}
	setPhase(key, "") // deleted
	if got := testutil.ToFloat64(experimentsByPhase.WithLabelValues("Aborted")); got != 0 {
		t.Fatalf("a deleted experiment still counted: %v", got)
	}
	if n := testutil.CollectAndCount(toggleApplied) + testutil.CollectAndCount(windowLatency); n != 0 {
		t.Fatalf("%d per-experiment series left after deletion", n)
	}
}
