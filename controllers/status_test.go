package controllers

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
	"perfexp.dev/perf-operator/internal/engine"
)

func TestSetConditions(t *testing.T) {
	now := time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)
	on := &perfv1.ToggleStatus{Applied: true}
	off := &perfv1.ToggleStatus{Applied: false}
	abort := &perfv1.AbortStatus{Reason: perfv1.ReasonHeapGrowth, Message: "heap +712 MiB/min"}
	type want map[string]metav1.ConditionStatus // absent: "-"
	for _, tc := range []struct {
		name   string
		st     perfv1.PerfExperimentStatus
		d      engine.Decision
		want   want
		reason string // Ready's reason
	}{
		{"new, target missing", perfv1.PerfExperimentStatus{}, engine.Decision{Stall: &engine.Stall{Reason: perfv1.ReasonTargetNotFound, Message: "x"}},
			want{"Ready": "False", "Stalled": "True", "Reconciling": "-", "ToggleApplied": "-", "TargetLocked": "-", "Complete": "False"}, perfv1.ReasonTargetNotFound},
		// Queued behind another experiment: progress, never Stalled, so GitOps
		// tools keep waiting; the reason says Queued and the message the holder.
		{"queued behind another experiment", perfv1.PerfExperimentStatus{Phase: perfv1.PhasePending},
			engine.Decision{Waiting: "queued: held by experiment shop/other", WaitReason: perfv1.ReasonQueued},
			want{"Ready": "False", "Stalled": "-", "Reconciling": "True", "Complete": "False"}, perfv1.ReasonQueued},
		{"pending, waiting for a rollout", perfv1.PerfExperimentStatus{Phase: perfv1.PhasePending}, engine.Decision{Waiting: "rollout"},
			want{"Ready": "False", "Stalled": "-", "Reconciling": "True", "ToggleApplied": "-", "Complete": "False"}, perfv1.ReasonProgressing},
		{"baseline", perfv1.PerfExperimentStatus{Phase: perfv1.PhaseBaseline, Toggle: off}, engine.Decision{},
			want{"Ready": "False", "Reconciling": "True", "Stalled": "-", "ToggleApplied": "False", "TargetLocked": "True"}, perfv1.ReasonProgressing},
		{"treatment", perfv1.PerfExperimentStatus{Phase: perfv1.PhaseTreatment, Toggle: on}, engine.Decision{},
			want{"Ready": "False", "Reconciling": "True", "ToggleApplied": "True", "TargetLocked": "True"}, perfv1.ReasonProgressing},
		{"succeeded", perfv1.PerfExperimentStatus{Phase: perfv1.PhaseSucceeded, Toggle: off}, engine.Decision{},
			want{"Ready": "True", "Reconciling": "-", "Stalled": "-", "ToggleApplied": "False", "TargetLocked": "False", "Complete": "True"}, perfv1.ReasonSucceeded},
		{"aborted by a guardrail", perfv1.PerfExperimentStatus{Phase: perfv1.PhaseAborted, Toggle: off, Abort: abort}, engine.Decision{},
			want{"Ready": "False", "Reconciling": "-", "Stalled": "True", "ToggleApplied": "False", "TargetLocked": "False", "Complete": "True"}, perfv1.ReasonHeapGrowth},
		{"failed", perfv1.PerfExperimentStatus{Phase: perfv1.PhaseFailed, Toggle: off}, engine.Decision{},
			want{"Ready": "False", "Reconciling": "-", "Stalled": "True", "Complete": "True"}, perfv1.ReasonLoadFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := tc.st
			// Start from a stale picture: conditions from an earlier phase must
			// not survive.
			st.Conditions = []metav1.Condition{{Type: "Reconciling", Status: "True", Reason: "Old"}, {Type: "Stalled", Status: "True", Reason: "Old"}}
			setConditions(&st, nil, 7, tc.d, now)
			for typ, s := range tc.want {
				c := meta.FindStatusCondition(st.Conditions, typ)
				switch {
				case s == "-" && c != nil:
					t.Errorf("%s present (%s); want absent", typ, c.Status)
				case s != "-" && (c == nil || c.Status != s):
					t.Errorf("%s = %v; want %s", typ, c, s)
				case c != nil && c.ObservedGeneration != 7:
					t.Errorf("%s observedGeneration %d", typ, c.ObservedGeneration)
				}
			}
			if r := meta.FindStatusCondition(st.Conditions, "Ready"); r == nil || r.Reason != tc.reason {
				t.Errorf("Ready reason %v; want %s", r, tc.reason)
			}
			if st.Phase == "" {
				t.Error("phase left empty")
			}
		})
	}
}

// Complete ends a `kubectl wait` on every outcome, its reason the phase; Passed
// carries the verdict with the reasons docs/gates.md documents.
func TestCompleteAndPassedReadTheOutcome(t *testing.T) {
	now := time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)
	crit := &perfv1.SuccessCriteria{}
	abort := &perfv1.AbortStatus{Reason: perfv1.ReasonAbortRequested, Message: "spec.abort"}
	for _, tc := range []struct {
		name           string
		st             perfv1.PerfExperimentStatus
		complete       metav1.ConditionStatus
		completeReason string
		passed         metav1.ConditionStatus
		passedReason   string
	}{
		{name: "running", st: perfv1.PerfExperimentStatus{Phase: perfv1.PhaseTreatment},
			complete: "False", completeReason: perfv1.ReasonProgressing, passed: "Unknown", passedReason: perfv1.ReasonNoVerdict},
		{name: "pass", st: perfv1.PerfExperimentStatus{Phase: perfv1.PhaseSucceeded, Verdict: perfv1.VerdictPass},
			complete: "True", completeReason: perfv1.ReasonSucceeded, passed: "True", passedReason: perfv1.ReasonCriteriaMet},
		{name: "fail", st: perfv1.PerfExperimentStatus{Phase: perfv1.PhaseSucceeded, Verdict: perfv1.VerdictFail},
			complete: "True", completeReason: perfv1.ReasonSucceeded, passed: "False", passedReason: perfv1.ReasonCriteriaExceeded},
		{name: "inconclusive", st: perfv1.PerfExperimentStatus{Phase: perfv1.PhaseSucceeded, Verdict: perfv1.VerdictInconclusive},
			complete: "True", completeReason: perfv1.ReasonSucceeded, passed: "Unknown", passedReason: perfv1.ReasonInconclusive},
		{name: "aborted", st: perfv1.PerfExperimentStatus{Phase: perfv1.PhaseAborted, Verdict: perfv1.VerdictInconclusive, Abort: abort},
			complete: "True", completeReason: perfv1.ReasonAborted, passed: "Unknown", passedReason: perfv1.ReasonNoVerdict},
		{name: "failed", st: perfv1.PerfExperimentStatus{Phase: perfv1.PhaseFailed, Verdict: perfv1.VerdictInconclusive},
			complete: "True", completeReason: perfv1.ReasonFailed, passed: "Unknown", passedReason: perfv1.ReasonNoVerdict},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := tc.st
			setConditions(&st, &perfv1.PerfExperimentSpec{SuccessCriteria: crit}, 1, engine.Decision{}, now)
			c := meta.FindStatusCondition(st.Conditions, perfv1.ConditionComplete)
			if c == nil || c.Status != tc.complete || c.Reason != tc.completeReason {
				t.Errorf("Complete = %+v; want %s %s", c, tc.complete, tc.completeReason)
			}
			p := meta.FindStatusCondition(st.Conditions, perfv1.ConditionPassed)
			if p == nil || p.Status != tc.passed || p.Reason != tc.passedReason {
				t.Errorf("Passed = %+v; want %s %s", p, tc.passed, tc.passedReason)
			}
		})
	}
}

func TestCompleteStatesTheNoiseFloorOfACalibration(t *testing.T) {
	mde := 0.031
	st := perfv1.PerfExperimentStatus{Phase: perfv1.PhaseSucceeded, Verdict: perfv1.VerdictNoEffect,
		Summary: []perfv1.StageSummary{{Stage: "100", CPU: &perfv1.MetricComparison{MDE: &mde}, Memory: &perfv1.MetricComparison{}}}}
	setConditions(&st, &perfv1.PerfExperimentSpec{Calibrate: true}, 1, engine.Decision{}, time.Now())
	c := meta.FindStatusCondition(st.Conditions, perfv1.ConditionComplete)
	want := "the experiment completed: calibration (A/A, the toggle was never switched): all 1 stages measured, verdict NoEffect; no effect larger than CPU ±3.1 % could be seen; 0 of 2 comparisons looked significant from noise alone (about 1 in 20 is expected)"
	if c == nil || c.Message != want {
		t.Errorf("Complete %+v;\nwant message %q", c, want)
	}
}
