package engine

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
	"perfexp.dev/perf-operator/internal/guardrail"
)

// decider carries one decision's inputs and its growing result.
type decider struct {
	exp  *perfv1.PerfExperiment
	spec *perfv1.PerfExperimentSpec
	obs  Observed
	plan plan
	// persisted is the status as read; st is the new one.
	persisted *perfv1.PerfExperimentStatus
	st        *perfv1.PerfExperimentStatus
	d         Decision
	// guardState is the guardrail state of measurement guardOf (st's), decoded
	// once per decision and stored back by storeGuard (withGuard).
	guardState *guardrail.State
	guardOf    *perfv1.MeasurementStatus
}

// Decide returns what the experiment does next. exp must be defaulted; it is not
// modified.
func Decide(exp *perfv1.PerfExperiment, obs Observed) Decision {
	x := &decider{exp: exp, spec: &exp.Spec, obs: obs, persisted: &exp.Status, st: exp.Status.DeepCopy()}
	var planErr error
	x.plan, planErr = newPlan(x.spec, obs.Target)
	switch {
	case obs.Deleting:
		x.finalize()
	case x.st.Phase.IsTerminal():
		x.housekeeping()
	case x.st.Phase == "" || x.st.Phase == perfv1.PhasePending:
		x.preflight(planErr)
	default:
		x.run()
	}
	x.storeGuard()
	x.d.Status = *x.st
	return x.d
}

func (x *decider) now() metav1.Time { return metav1.NewTime(x.obs.Now) }

func (x *decider) self() string { return x.exp.Namespace + "/" + x.exp.Name }

func (x *decider) act(a Action) { x.d.Actions = append(x.d.Actions, a) }

func (x *decider) event(warning bool, reason, format string, args ...any) {
	x.d.Events = append(x.d.Events, Event{Warning: warning, Reason: reason, Message: fmt.Sprintf(format, args...)})
}

// wakeAt asks to be reconciled at t at the latest.
func (x *decider) wakeAt(t time.Time) {
	after := t.Sub(x.obs.Now)
	if after <= 0 {
		after = time.Millisecond
	}
	if x.d.RequeueAfter == 0 || after < x.d.RequeueAfter {
		x.d.RequeueAfter = after
	}
}

// changesAt records when the status is due to change next (Decision.ChangesAt):
// the earliest such time of this decision.
func (x *decider) changesAt(t time.Time) {
	if x.d.ChangesAt.IsZero() || t.Before(x.d.ChangesAt) {
		x.d.ChangesAt = t
	}
}

func (x *decider) wait(what string) {
	if x.d.Waiting == "" {
		x.d.Waiting = what
	}
}

// enter moves to a phase at stage.
func (x *decider) enter(p perfv1.Phase, stage int32) {
	x.st.Phase = p
	t := x.now()
	x.st.PhaseStartTime = &t
	if p.IsTerminal() {
		x.st.CurrentStage = ""
		return
	}
	x.st.StageIndex = &stage
	variant := ""
	switch p {
	case perfv1.PhaseSwitching, perfv1.PhaseTreatment, perfv1.PhaseReverting:
		variant = x.arm().Name
	case perfv1.PhaseBaseline:
		if x.st.VariantIndex != nil {
			variant = "after " + x.arm().Name // the baseline that closes a variant
		}
	}
	x.st.CurrentStage = stageLabel(x.spec, stage, variant)
}

// arm is the change being applied, measured or reverted: spec.toggle, or the
// variant status.variantIndex names (the first before any).
func (x *decider) arm() perfv1.Arm {
	arms := x.spec.Arms()
	if len(arms) == 0 {
		return perfv1.Arm{}
	}
	i := int32(0)
	if x.st.VariantIndex != nil && len(x.spec.Variants) > 0 {
		i = min(max(*x.st.VariantIndex, 0), int32(len(arms)-1))
	}
	return arms[i]
}

// appliedArm is the arm whose toggle was last applied (status.toggle.variant):
// a revert sends its switch-back. It falls back to the current arm for a
// status written before the variant was recorded.
func (x *decider) appliedArm() perfv1.Arm {
	if x.st.Toggle != nil {
		if a, ok := x.spec.ArmNamed(x.st.Toggle.Variant); ok {
			return a
		}
	}
	return x.arm()
}

// toggleEverApplied reports whether the toggle has been applied in this run
// (AppliedAt stays set after a revert): from then on the guardrails and the
// live load checks judge the target.
func (x *decider) toggleEverApplied() bool {
	return x.st.Toggle != nil && x.st.Toggle.AppliedAt != nil
}

func (x *decider) stage() int32 {
	if x.st.StageIndex == nil {
		return 0
	}
	return *x.st.StageIndex
}

func (x *decider) holdsLock() bool {
	return x.obs.Target != nil && x.obs.Target.HeldBy == x.self()
}

// preflight checks what only the cluster can know, then takes the lock and starts.
// Nothing on the target changes until every check passed.
func (x *decider) preflight(planErr error) {
	x.st.Phase = perfv1.PhasePending
	if errs := x.exp.Validate(); len(errs) > 0 {
		x.stall(perfv1.ReasonInvalidSpec, errs.ToAggregate().Error())
		return
	}
	if planErr != nil {
		x.stall(perfv1.ReasonInvalidSpec, planErr.Error())
		return
	}
	if x.spec.Abort {
		x.finish(perfv1.PhaseAborted, perfv1.ReasonAbortRequested, "spec.abort was set before the experiment started; nothing was changed")
		return
	}
	t := x.obs.Target
	switch {
	case t == nil:
		x.stall(perfv1.ReasonTargetNotFound, fmt.Sprintf("Deployment %q not found in namespace %q", x.spec.Target.Deployment, x.exp.Namespace))
		return
	case t.HeldBy != "" && t.HeldBy != x.self() && t.HolderGone:
		x.stall(perfv1.ReasonTargetHeld, fmt.Sprintf("Deployment %q is held by experiment %s, which no longer exists: check the target, then remove its annotations %s and %s", x.spec.Target.Deployment, t.HeldBy, perfv1.AnnotationLock, perfv1.AnnotationOriginal))
		return
	case t.HeldBy != "" && t.HeldBy != x.self():
		// Queued, not stalled: the holder's ending releases the target, and its
		// Deployment event wakes this experiment; nobody has to act.
		x.wait(fmt.Sprintf("queued: Deployment %q is held by experiment %s; this one starts when it ends", x.spec.Target.Deployment, t.HeldBy))
		x.d.WaitReason = perfv1.ReasonQueued
		return
	case t.CaptureError != "":
		x.stall(t.CaptureReason, t.CaptureError)
		return
	case t.MissingLimits != "":
		x.stall(perfv1.ReasonTargetMissingLimits, fmt.Sprintf("container of Deployment %q has no %s; utilisation cannot be measured without CPU and memory limits", x.spec.Target.Deployment, t.MissingLimits))
		return
	case x.obs.ScriptMissing != "":
		x.stall(perfv1.ReasonScriptNotFound, x.obs.ScriptMissing)
		return
	case x.obs.InvalidSpec != "":
		x.stall(perfv1.ReasonInvalidSpec, x.obs.InvalidSpec)
		return
	case x.obs.NotAllowed != "":
		x.stall(perfv1.ReasonNotAllowed, x.obs.NotAllowed)
		return
	case x.obs.Forbidden != "":
		x.stall(perfv1.ReasonForbidden, x.obs.Forbidden)
		return
	case !t.Rollout.Complete && !x.holdsLock():
		x.wait("target rollout in progress: " + t.Rollout.Message)
		return
	}
	x.act(Action{Kind: ActionAcquireLock, Original: t.Original})
	x.act(Action{Kind: ActionEnsureScript})
	x.st.Toggle = &perfv1.ToggleStatus{Applied: false, Original: t.Original}
	x.startMeasurement()
	now := x.now()
	x.st.StartTime = &now
	if x.spec.HasToggle() {
		x.event(false, perfv1.ReasonLockHeld, "holding Deployment %s; original state recorded", x.spec.Target.Deployment)
	} else {
		x.event(false, perfv1.ReasonLockHeld, "holding Deployment %s for a load-only sweep: nothing on it is changed", x.spec.Target.Deployment)
	}
	if x.spec.Interleaved() {
		x.st.Interleaving = interleavingSchedule(x.exp)
	}
	if x.spec.Warmup != nil {
		x.enter(perfv1.PhaseWarmingUp, -1)
		x.openWindow(perfv1.VariantWarmup)
		return
	}
	x.beginStage(0)
}

func (x *decider) stall(reason, msg string) {
	x.d.Stall = &Stall{Reason: reason, Message: msg}
}

// run advances a started experiment.
func (x *decider) run() {
	x.deleteRecordedJobs()
	switch {
	case x.spec.Abort:
		x.finish(perfv1.PhaseAborted, perfv1.ReasonAbortRequested, "spec.abort was set")
		return
	case x.obs.Target == nil:
		x.finish(perfv1.PhaseFailed, perfv1.ReasonTargetNotFound, fmt.Sprintf("Deployment %q was deleted during the experiment", x.spec.Target.Deployment))
		return
	case x.obs.ToggleError != "":
		x.finish(perfv1.PhaseAborted, perfv1.ReasonToggleFailed, x.obs.ToggleError)
		return
	case x.obs.Target.Changed != "":
		x.finish(perfv1.PhaseAborted, perfv1.ReasonTargetChanged, x.obs.Target.Changed)
		return
	}
	if msg := x.lockLost(); msg != "" {
		// The lock is also gone when this experiment released it itself and
		// the status write recording the ending was lost: then the same
		// decision ends the run again, and that ending stands.
		x.storeGuard()
		trial := &decider{exp: x.exp, spec: x.spec, obs: x.obs, plan: x.plan, persisted: x.persisted, st: x.st.DeepCopy()}
		trial.d.Actions = append([]Action(nil), x.d.Actions...)
		trial.advance()
		if trial.st.Phase.IsTerminal() {
			*x = *trial
			return
		}
		x.finish(perfv1.PhaseAborted, perfv1.ReasonTargetChanged, msg)
		return
	}
	x.advance()
}

// advance moves a running experiment through its phase.
func (x *decider) advance() {
	if samplingPhase(x.st.Phase) && !x.measureSamples() {
		return
	}
	if !x.judgeLive() {
		return
	}
	defer x.wakeForSample()
	if x.spec.Interleaved() && samplingPhase(x.st.Phase) {
		x.interleaving()
		return
	}
	switch x.st.Phase {
	case perfv1.PhaseWarmingUp:
		x.warmingUp()
	case perfv1.PhaseBaseline:
		x.baseline()
	case perfv1.PhaseSwitching:
		x.switching()
	case perfv1.PhaseTreatment:
		x.treatment()
	case perfv1.PhaseReverting:
		x.reverting()
	case perfv1.PhaseAnalyzing:
		x.analyzing()
	}
}

// finish ends the run in a terminal phase: the load stops, the toggle is
// reverted, the lock released, open windows closed. Every action is idempotent,
// so finishing twice (a crash before the status write) is harmless.
func (x *decider) finish(phase perfv1.Phase, reason, msg string) {
	x.stopEverything()
	now := x.now()
	for i := range x.st.Windows {
		if w := &x.st.Windows[i]; w.End == nil {
			w.End = &now
			w.Valid = boolPtr(false)
			w.Invalid = append(w.Invalid, "interrupted: "+msg)
		}
	}
	x.enter(phase, 0)
	x.st.CompletionTime = &now
	if phase == perfv1.PhaseSucceeded {
		x.event(false, perfv1.ReasonSucceeded, "%s", msg)
		return
	}
	x.st.Abort = &perfv1.AbortStatus{Reason: reason, Message: msg, At: now}
	x.st.Verdict = perfv1.VerdictInconclusive
	x.event(true, reason, "%s: %s", phase, msg)
}

// stopEverything stops running load, reverts the toggle and releases the lock,
// in that order: a revert that hangs or fails must not keep the load running.
func (x *decider) stopEverything() {
	// A finished Job stays until its results are in the persisted status
	// (housekeeping removes it then): if this decision's status write is lost,
	// the next one still finds the results.
	for _, name := range sortedJobNames(x.obs.Jobs) {
		if j := x.obs.Jobs[name]; !j.Complete && !j.Failed {
			x.act(Action{Kind: ActionDeleteJob, JobName: name})
		}
	}
	x.deleteRecordedJobs()
	if x.mayRevert() {
		x.revert()
	}
	if x.obs.Target == nil && x.st.Toggle != nil {
		// The target is gone, and its pods with the toggle: nothing is applied.
		x.st.Toggle.Applied, x.st.Toggle.Pods = false, nil
	}
	x.release()
}

// release removes the lock, or the label a lost lock left behind.
func (x *decider) release() {
	switch {
	case x.holdsLock():
		x.act(Action{Kind: ActionReleaseLock})
		x.event(false, perfv1.ReasonLockReleased, "released Deployment %s", x.spec.Target.Deployment)
	case x.obs.Target != nil && x.obs.Target.HeldBy == "" && x.st.Toggle != nil:
		x.act(Action{Kind: ActionReleaseLock})
	}
}

// lockLost says how the lock of a started run was lost, or "": the lock
// annotations were removed (kubectl replace, a GitOps sync with Replace=true)
// or someone else's lock is on the target now.
func (x *decider) lockLost() string {
	t := x.obs.Target
	if t == nil || x.holdsLock() || x.st.Toggle == nil {
		return ""
	}
	if t.HeldBy == "" {
		return fmt.Sprintf("the lock annotations on Deployment %s were removed while the experiment held it (kubectl replace, or a sync that replaces the object?)", x.spec.Target.Deployment)
	}
	return fmt.Sprintf("Deployment %s is now locked by %s, not by this experiment", x.spec.Target.Deployment, t.HeldBy)
}

// togglePending reports whether the status says the toggle may be on: applied,
// or sent to pods (recorded before sending) that were not switched back yet.
func (x *decider) togglePending() bool {
	return x.st.Toggle != nil && (x.st.Toggle.Applied || len(x.st.Toggle.Pods) > 0)
}

// mayRevert reports whether an ending reverts: the target exists and nobody
// else holds it, and this experiment holds it (a crash between applying and
// recording leaves status and target apart, and reverting an unapplied toggle
// is a no-op) or its status says the toggle may be on. The revert runs from the
// recorded original whether or not the lock is still there.
func (x *decider) mayRevert() bool {
	if !x.spec.HasToggle() {
		return false // a load-only sweep switched nothing
	}
	t := x.obs.Target
	if t == nil || (t.HeldBy != "" && !x.holdsLock()) {
		return false
	}
	return x.holdsLock() || x.togglePending()
}

// revert restores the target from the original-state record, and every pod the
// toggle may be on. After guardrails.revertTimeout of failing reverts, the
// pods it cannot reach are handed to toggle.onRevertFailure instead.
func (x *decider) revert() {
	original := ""
	if x.obs.Target != nil {
		original = x.obs.Target.Original
	}
	if x.st.Toggle != nil && x.st.Toggle.Original != "" {
		original = x.st.Toggle.Original
	}
	var pods []string
	if x.st.Toggle != nil {
		pods = x.st.Toggle.Pods
	}
	if x.escalate(pods) {
		return
	}
	arm := x.appliedArm()
	x.act(Action{Kind: ActionRevertToggle, Original: original, Pods: pods, Toggle: arm.Toggle})
	if x.st.Toggle != nil && x.st.Toggle.Applied {
		now := x.now()
		x.st.Toggle.Applied = false
		x.st.Toggle.RevertedAt = &now
		if arm.Name != "" {
			x.event(false, perfv1.ReasonToggleOff, "variant %s reverted on Deployment %s", arm.Name, x.spec.Target.Deployment)
		} else {
			x.event(false, perfv1.ReasonToggleOff, "toggle reverted on Deployment %s", x.spec.Target.Deployment)
		}
	}
}

// escalate hands pods a revert could not reach for guardrails.revertTimeout to
// toggle.onRevertFailure, and reports whether it did. Only runtime toggles
// escalate: a template revert is one API write, retried until it goes through.
func (x *decider) escalate(pods []string) bool {
	c := meta.FindStatusCondition(x.persisted.Conditions, perfv1.ConditionRevertFailing)
	if len(pods) == 0 || x.spec.Switch().RollsPods() || c == nil || c.Status != metav1.ConditionTrue {
		return false
	}
	timeout := x.plan.revertTimeout
	if x.obs.Now.Sub(c.LastTransitionTime.Time) < timeout {
		return false
	}
	now := x.now()
	x.st.Toggle.Applied = false
	x.st.Toggle.RevertedAt = &now
	if x.appliedArm().Toggle.OnRevertFailure == perfv1.RevertFailureKeep {
		x.d.RevertOutcome = perfv1.ReasonRevertAbandoned
		x.event(true, perfv1.ReasonRevertAbandoned, "the revert failed for %s; toggle.onRevertFailure is Keep: the toggle may still be on pods %s", timeout, strings.Join(pods, ", "))
		return true
	}
	x.act(Action{Kind: ActionDeletePods, Pods: pods})
	x.st.Toggle.Pods = nil
	x.d.RevertOutcome = perfv1.ReasonPodsRestarted
	x.event(true, perfv1.ReasonPodsRestarted, "the revert failed for %s; deleted pods %s so that they come back without the toggle", timeout, strings.Join(pods, ", "))
	return true
}

// finalize runs on deletion: stop the load, revert, release, then let the
// object go.
func (x *decider) finalize() {
	for _, name := range sortedJobNames(x.obs.Jobs) {
		x.act(Action{Kind: ActionDeleteJob, JobName: name})
	}
	if x.mayRevert() && !x.abandoned() {
		x.revert()
	}
	if x.holdsLock() || (x.obs.Target != nil && x.obs.Target.HeldBy == "" && x.st.Toggle != nil) {
		x.act(Action{Kind: ActionReleaseLock})
	}
	x.act(Action{Kind: ActionRemoveFinalizer})
}

// abandoned reports whether a revert was given up under toggle.onRevertFailure
// Keep: the pods stay as they are, for inspection.
func (x *decider) abandoned() bool {
	c := meta.FindStatusCondition(x.persisted.Conditions, perfv1.ConditionRevertFailing)
	return c != nil && c.Reason == perfv1.ReasonRevertAbandoned
}

// housekeeping keeps a finished experiment tidy: Jobs whose results are recorded
// go (policy Delete), and a toggle left on or a lock left by a crash before the
// status write (or a revert still failing) is reverted and released.
func (x *decider) housekeeping() {
	if x.mayRevert() && !x.abandoned() {
		x.revert()
	}
	if x.holdsLock() {
		x.act(Action{Kind: ActionReleaseLock})
	}
	if x.spec.Cleanup.Jobs == perfv1.JobsPolicyDelete {
		for _, name := range sortedJobNames(x.obs.Jobs) {
			x.act(Action{Kind: ActionDeleteJob, JobName: name})
		}
	}
}

// deleteRecordedJobs deletes, under policy Delete, Jobs whose windows are closed in
// the persisted status: their results are safe, so the load is never run twice.
func (x *decider) deleteRecordedJobs() {
	if x.spec.Cleanup.Jobs != perfv1.JobsPolicyDelete {
		return
	}
	// An interleaved stage's Job carries several windows: it goes once none
	// of them is open.
	open := map[string]bool{}
	for _, w := range x.persisted.Windows {
		if w.End == nil {
			open[w.Job] = true
		}
	}
	done := map[string]bool{}
	for _, w := range x.persisted.Windows {
		if w.End != nil && w.Job != "" && !open[w.Job] && !done[w.Job] && x.obs.Jobs[w.Job] != nil {
			done[w.Job] = true
			x.act(Action{Kind: ActionDeleteJob, JobName: w.Job})
		}
	}
}

func boolPtr(b bool) *bool { return &b }

func metav1Time(t time.Time) metav1.Time { return metav1.NewTime(t) }

// errorRateBreach reports whether a window's failures exceed guardrails.errorRate.
func (x *decider) errorRateBreach(w *perfv1.WindowStatus) (string, bool) {
	if w.Load == nil || w.Load.Requests == 0 {
		return "", false
	}
	limit, err := x.spec.Guardrails.ErrorRate.Fraction()
	if err != nil {
		return "", false
	}
	rate := float64(w.Load.Failures) / float64(w.Load.Requests)
	if rate <= limit {
		return "", false
	}
	return fmt.Sprintf("error rate %.2f%% (%d of %d requests) in the %s window of stage %s, limit %s",
		rate*100, w.Load.Failures, w.Load.Requests, w.Variant, x.spec.StageName(int(w.Stage)), x.spec.Guardrails.ErrorRate), true
}

// describe lists what a failed Job reported.
func describe(j *Job) string {
	parts := []string{}
	if j.FailureMessage != "" {
		parts = append(parts, j.FailureMessage)
	}
	parts = append(parts, j.ResultErrors...)
	if len(parts) == 0 {
		return "no reason given"
	}
	return strings.Join(parts, "; ")
}
