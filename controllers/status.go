package controllers

import (
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
	"perfexp.dev/perf-operator/internal/engine"
)

// setConditions derives every condition from the phase and the decision, in this
// one place, so kstatus readers (Argo CD, Flux, kubectl wait) always see a
// consistent picture:
//
//	running           Reconciling=True  Ready=False  Complete=False
//	queued            Reconciling=True  Ready=False  Complete=False (reason Queued)
//	stalled/pending   Stalled=True      Ready=False  Complete=False
//	Succeeded         Ready=True        Complete=True (no Reconciling, no Stalled)
//	Failed, Aborted   Stalled=True      Ready=False  Complete=True
func setConditions(st *perfv1.PerfExperimentStatus, spec *perfv1.PerfExperimentSpec, gen int64, d engine.Decision, now time.Time) {
	if spec == nil {
		spec = &perfv1.PerfExperimentSpec{}
	}
	crit := spec.SuccessCriteria
	set := func(t string, s metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: gen, LastTransitionTime: metav1.NewTime(now),
		})
	}
	started := st.Phase != "" && st.Phase != perfv1.PhasePending
	switch {
	case st.Phase == perfv1.PhaseSucceeded:
		final := "status.summary is final"
		if !spec.HasToggle() && len(st.Summary) == 0 {
			final = "status.curve is final"
		}
		set(perfv1.ConditionReady, metav1.ConditionTrue, perfv1.ReasonSucceeded, "the experiment completed; "+final)
		set(perfv1.ConditionComplete, metav1.ConditionTrue, perfv1.ReasonSucceeded, "the experiment completed: "+engine.Outcome(spec, st))
		removeCondition(&st.Conditions, perfv1.ConditionReconciling)
		removeCondition(&st.Conditions, perfv1.ConditionStalled)
	case st.Phase.IsTerminal():
		reason, msg := perfv1.ReasonLoadFailed, string(st.Phase)
		if st.Abort != nil {
			reason, msg = st.Abort.Reason, st.Abort.Message
		}
		set(perfv1.ConditionReady, metav1.ConditionFalse, reason, msg)
		set(perfv1.ConditionStalled, metav1.ConditionTrue, reason, msg)
		// Complete's reason is the phase, so one wait line ends on every
		// outcome and its reason says which; the cause stays in Ready/Stalled.
		set(perfv1.ConditionComplete, metav1.ConditionTrue, string(st.Phase), "the experiment ended "+string(st.Phase)+": "+reason+": "+msg)
		removeCondition(&st.Conditions, perfv1.ConditionReconciling)
	case d.Stall != nil:
		set(perfv1.ConditionReady, metav1.ConditionFalse, d.Stall.Reason, d.Stall.Message)
		set(perfv1.ConditionStalled, metav1.ConditionTrue, d.Stall.Reason, d.Stall.Message)
		set(perfv1.ConditionComplete, metav1.ConditionFalse, d.Stall.Reason, d.Stall.Message)
		removeCondition(&st.Conditions, perfv1.ConditionReconciling)
	default:
		msg, reason := d.Waiting, d.WaitReason
		if msg == "" {
			msg = "phase " + string(st.Phase)
		}
		if reason == "" {
			reason = perfv1.ReasonProgressing
		}
		set(perfv1.ConditionReady, metav1.ConditionFalse, reason, msg)
		set(perfv1.ConditionReconciling, metav1.ConditionTrue, reason, msg)
		set(perfv1.ConditionComplete, metav1.ConditionFalse, reason, msg)
		removeCondition(&st.Conditions, perfv1.ConditionStalled)
	}
	if st.Phase == "" {
		st.Phase = perfv1.PhasePending
	}
	if !started {
		return
	}
	applied := st.Toggle != nil && st.Toggle.Applied
	switch {
	case applied:
		what := "the toggle"
		if st.Toggle.Variant != "" {
			what = "variant " + st.Toggle.Variant
		}
		set(perfv1.ConditionToggleApplied, metav1.ConditionTrue, perfv1.ReasonToggleOn, what+" is in effect on the target")
	case st.Toggle != nil && len(st.Toggle.Pods) > 0:
		// Sent to pods, or not yet switched back on them: on until reverted or gone.
		set(perfv1.ConditionToggleApplied, metav1.ConditionTrue, perfv1.ReasonToggleOn, "the toggle may be on in pods "+strings.Join(st.Toggle.Pods, ", "))
	case !spec.HasToggle() && spec.Target.Deployment != "":
		set(perfv1.ConditionToggleApplied, metav1.ConditionFalse, perfv1.ReasonToggleOff, "a load-only sweep: nothing on the target is switched")
	default:
		set(perfv1.ConditionToggleApplied, metav1.ConditionFalse, perfv1.ReasonToggleOff, "the target is as it was before the experiment")
	}
	if m := st.Measurement; m != nil && !st.Phase.IsTerminal() {
		if m.LastError != "" {
			set(perfv1.ConditionMetricsAvailable, metav1.ConditionFalse, perfv1.ReasonMetricsUnavailable, m.LastError)
		} else if m.LastSampleTime != nil {
			set(perfv1.ConditionMetricsAvailable, metav1.ConditionTrue, perfv1.ReasonMetricsOK, "samples from "+string(st.MetricsSource))
		}
	}
	setRevertFailing(st, d, gen, now)
	setPassed(st, crit, gen, now)
	if st.Phase.IsTerminal() {
		set(perfv1.ConditionTargetLocked, metav1.ConditionFalse, perfv1.ReasonLockReleased, "the target is released")
	} else {
		set(perfv1.ConditionTargetLocked, metav1.ConditionTrue, perfv1.ReasonLockHeld, "this experiment holds the target")
	}
}

// SetConditions is setConditions for tests outside this package: the gate
// recipes' test (cmd/kubectl-perf) writes statuses exactly as the controller
// does, so the documented `kubectl wait` lines are checked against the real
// conditions.
func SetConditions(st *perfv1.PerfExperimentStatus, crit *perfv1.SuccessCriteria, gen int64, d engine.Decision, now time.Time) {
	setConditions(st, &perfv1.PerfExperimentSpec{SuccessCriteria: crit}, gen, d, now)
}

// setPassed is the CI gate: present only with success criteria; True when every
// stage met them, False when one did not; Unknown with reason Inconclusive when
// the run completed without a trustworthy verdict, and with NoVerdict until the
// summary is final or when the run ended Aborted or Failed.
func setPassed(st *perfv1.PerfExperimentStatus, crit *perfv1.SuccessCriteria, gen int64, now time.Time) {
	if crit == nil {
		return
	}
	c := metav1.Condition{Type: perfv1.ConditionPassed, Status: metav1.ConditionUnknown, Reason: perfv1.ReasonNoVerdict,
		Message: "no verdict until every stage is measured", ObservedGeneration: gen, LastTransitionTime: metav1.NewTime(now)}
	switch {
	case st.Phase == perfv1.PhaseSucceeded && st.Verdict == perfv1.VerdictPass:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, perfv1.ReasonCriteriaMet, "every stage stayed within spec.successCriteria"
	case st.Phase == perfv1.PhaseSucceeded && st.Verdict == perfv1.VerdictFail:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, perfv1.ReasonCriteriaExceeded, "a stage exceeded spec.successCriteria: see status.summary"
	case st.Phase == perfv1.PhaseSucceeded:
		c.Reason, c.Message = perfv1.ReasonInconclusive, "the run completed without a trustworthy verdict ("+string(st.Verdict)+"): see status.summary"
	case st.Phase.IsTerminal():
		c.Message = "the run ended " + string(st.Phase) + " without a verdict"
	}
	meta.SetStatusCondition(&st.Conditions, c)
}

// setRevertFailing resolves a RevertFailing condition once the decision ends
// it: the revert went through, or toggle.onRevertFailure took over. It is set
// True where the revert fails (summarize), since a failing decision's status
// is not persisted.
func setRevertFailing(st *perfv1.PerfExperimentStatus, d engine.Decision, gen int64, now time.Time) {
	c := meta.FindStatusCondition(st.Conditions, perfv1.ConditionRevertFailing)
	if c == nil || c.Status != metav1.ConditionTrue {
		return
	}
	set := func(s metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: perfv1.ConditionRevertFailing, Status: s, Reason: reason, Message: msg, ObservedGeneration: gen, LastTransitionTime: metav1.NewTime(now),
		})
	}
	switch {
	case d.RevertOutcome == perfv1.ReasonPodsRestarted:
		set(metav1.ConditionFalse, d.RevertOutcome, "the revert kept failing; the pods it could not reach were deleted and replaced without the toggle")
	case d.RevertOutcome == perfv1.ReasonRevertAbandoned:
		msg := "the revert kept failing; toggle.onRevertFailure is Keep"
		if st.Toggle != nil && len(st.Toggle.Pods) > 0 {
			msg += ": the toggle may still be on in pods " + strings.Join(st.Toggle.Pods, ", ")
		}
		set(metav1.ConditionTrue, d.RevertOutcome, msg)
	case c.Reason == perfv1.ReasonRevertAbandoned:
	case st.Toggle == nil || (!st.Toggle.Applied && len(st.Toggle.Pods) == 0):
		set(metav1.ConditionFalse, perfv1.ReasonReverted, "the revert went through")
	}
}

// removeCondition removes the condition of type t, if there is one:
// meta.RemoveStatusCondition builds a new list even when there is none, and
// the conditions are set at every reconcile.
func removeCondition(cs *[]metav1.Condition, t string) {
	if meta.FindStatusCondition(*cs, t) != nil {
		meta.RemoveStatusCondition(cs, t)
	}
}
