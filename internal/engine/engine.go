package engine

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
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
	x.st.CurrentStage = stageLabel(x.spec, stage)
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
	case t.HeldBy != "" && t.HeldBy != x.self():
		msg := fmt.Sprintf("Deployment %q is held by experiment %s; this one starts when it ends", x.spec.Target.Deployment, t.HeldBy)
		if t.HolderGone {
			msg = fmt.Sprintf("Deployment %q is held by experiment %s, which no longer exists: check the target, then remove its annotations %s and %s", x.spec.Target.Deployment, t.HeldBy, perfv1.AnnotationLock, perfv1.AnnotationOriginal)
		}
		x.stall(perfv1.ReasonTargetHeld, msg)
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
	x.event(false, perfv1.ReasonLockHeld, "holding Deployment %s; original state recorded", x.spec.Target.Deployment)
	if x.spec.Warmup != nil {
		x.enter(perfv1.PhaseWarmingUp, -1)
		x.openWindow(perfv1.VariantWarmup)
		return
	}
	x.enter(perfv1.PhaseBaseline, 0)
	x.openWindow(perfv1.VariantBaseline)
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
	}
	if samplingPhase(x.st.Phase) && !x.measureSamples() {
		return
	}
	if !x.judgeLive() {
		return
	}
	defer x.wakeForSample()
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

// stopEverything reverts the toggle, stops running load and releases the lock.
func (x *decider) stopEverything() {
	if x.holdsLock() {
		x.revert()
	}
	// Running load stops now. A finished Job stays until its results are in the
	// persisted status (housekeeping removes it then): if this decision's status
	// write is lost, the next one still finds the results.
	for _, name := range sortedJobNames(x.obs.Jobs) {
		if j := x.obs.Jobs[name]; !j.Complete && !j.Failed {
			x.act(Action{Kind: ActionDeleteJob, JobName: name})
		}
	}
	x.deleteRecordedJobs()
	if x.holdsLock() {
		x.act(Action{Kind: ActionReleaseLock})
		x.event(false, perfv1.ReasonLockReleased, "released Deployment %s", x.spec.Target.Deployment)
	}
}

// revert restores the target. It is emitted whenever the run ends while this
// experiment holds the target, even when status says the toggle is off: a crash
// between applying and recording leaves the two apart, and reverting an
// unapplied toggle is a no-op.
func (x *decider) revert() {
	original := x.obs.Target.Original
	if x.st.Toggle != nil && x.st.Toggle.Original != "" {
		original = x.st.Toggle.Original
	}
	x.act(Action{Kind: ActionRevertToggle, Original: original})
	if x.st.Toggle != nil && x.st.Toggle.Applied {
		now := x.now()
		x.st.Toggle.Applied = false
		x.st.Toggle.RevertedAt = &now
		x.event(false, perfv1.ReasonToggleOff, "toggle reverted on Deployment %s", x.spec.Target.Deployment)
	}
}

// finalize runs on deletion: revert, stop, release, then let the object go.
func (x *decider) finalize() {
	if x.obs.Target != nil && x.holdsLock() {
		x.revert()
	}
	for _, name := range sortedJobNames(x.obs.Jobs) {
		x.act(Action{Kind: ActionDeleteJob, JobName: name})
	}
	if x.holdsLock() {
		x.act(Action{Kind: ActionReleaseLock})
	}
	x.act(Action{Kind: ActionRemoveFinalizer})
}

// housekeeping keeps a finished experiment tidy: Jobs whose results are recorded
// go (policy Delete) and a lock left by a crash before the status write is
// released, with the toggle reverted.
func (x *decider) housekeeping() {
	if x.holdsLock() {
		x.revert()
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
	for _, w := range x.persisted.Windows {
		if w.End != nil && w.Job != "" && x.obs.Jobs[w.Job] != nil {
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
