package engine

import (
	"fmt"
	"math"
	"sort"
	"time"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
	"perfexp.dev/perf-operator/internal/k6"
)

// The phases of a started run. Each advances at most one step per decision and
// persists before the next, so a restart resumes exactly where the status says.

func (x *decider) warmingUp() {
	if !x.measure(perfv1.VariantWarmup) {
		return
	}
	x.beginStage(0)
}

func (x *decider) baseline() {
	if x.openRecord(perfv1.VariantSettle) != nil && !x.settled() {
		return // the new stage's load settles before its first baseline
	}
	if !x.measure(perfv1.VariantBaseline) {
		return
	}
	s := x.stage()
	if !x.spec.HasToggle() {
		// A load-only sweep measures each stage once.
		x.nextStage()
		return
	}
	if len(x.spec.Variants) > 0 {
		// Variants are bracketed by baselines: the stage's first baseline
		// opens the first variant, and the baseline measured after variant i
		// closes it and opens variant i+1; after the last, the stage is done.
		next := int32(0)
		if x.st.VariantIndex != nil {
			n, more := x.nextVariant()
			if !more {
				x.nextStage()
				return
			}
			next = n
		}
		x.st.VariantIndex = &next
	}
	x.switchOn(s)
}

// switchOn applies the current arm's toggle (spec.toggle, or the variant
// status.variantIndex names) and keeps load on the target while it rolls out
// and settles.
func (x *decider) switchOn(s int32) {
	if !x.spec.Calibrate { // an A/A run measures its second arm untouched
		x.applyToggle(s)
	}
	x.enter(perfv1.PhaseSwitching, s)
	if x.plan.needsSettle(x.spec) {
		x.openSettle(s, false, x.arm().Name)
	}
	x.switching()
}

// nextVariant is the index of the variant to measure after the current one
// at this stage, or false after the last (or without variants).
func (x *decider) nextVariant() (int32, bool) {
	if x.st.VariantIndex == nil {
		return 0, false
	}
	next := *x.st.VariantIndex + 1
	return next, next < int32(len(x.spec.Variants))
}

func (x *decider) switching() {
	if !x.settled() {
		return
	}
	x.enter(perfv1.PhaseTreatment, x.stage())
	x.openWindow(perfv1.VariantTreatment)
}

func (x *decider) treatment() {
	if !x.measure(perfv1.VariantTreatment) {
		return
	}
	s := x.stage()
	x.revert()
	x.enter(perfv1.PhaseReverting, s)
	if len(x.spec.Variants) == 0 && s+1 >= int32(len(x.spec.Stages)) {
		// Nothing is measured after the last revert: the run ends without
		// waiting for its rollout. Decided from the status alone, so that a
		// restart after this ending's lock release (its status write lost)
		// decides the same ending again, whatever the rollout is doing,
		// instead of taking the released lock for someone else's doing.
		x.nextStage()
		return
	}
	// The revert settles under the load that comes next: this stage's, for
	// the baseline that closes a variant, or the next stage's, before its
	// baseline.
	switch {
	case !x.plan.needsSettle(x.spec):
	case len(x.spec.Variants) > 0:
		x.openSettle(s, true, x.arm().Name)
	case s+1 < int32(len(x.spec.Stages)):
		x.openSettle(s+1, true, x.arm().Name)
	}
	x.reverting()
}

func (x *decider) reverting() {
	if !x.settled() {
		return
	}
	if len(x.spec.Variants) > 0 {
		// The baseline after a variant: it closes this variant's bracket
		// (the variant is compared with the baselines on both sides of it,
		// which cancels a linear drift) and opens the next one's. Each
		// variant starts from the original state, with the same revert
		// guarantees as a single toggle: the previous one was reverted, and
		// its rollout completed and settled, before it is applied.
		x.enter(perfv1.PhaseBaseline, x.stage())
		x.openWindow(perfv1.VariantBaseline)
		return
	}
	x.nextStage()
}

// nextStage begins the stage after the current one, or the analysis after the
// last.
func (x *decider) nextStage() {
	next := x.stage() + 1
	if next >= int32(len(x.spec.Stages)) {
		x.enter(perfv1.PhaseAnalyzing, x.stage())
		x.analyzing()
		return
	}
	x.resetGuard()
	x.beginStage(next)
}

// openWindow records a new measured window and creates its load Job. Its start
// is set when the Job's pods run, not now.
func (x *decider) openWindow(v perfv1.Variant) {
	stage := x.stage()
	w := x.plan.measured(x.spec, stage, v)
	if v == perfv1.VariantTreatment || (v == perfv1.VariantBaseline && x.st.VariantIndex != nil) {
		// A variant's treatment, or the baseline measured after it.
		w.Arm = x.arm().Name
	}
	name := k6.JobName(x.exp.Name, w)
	x.st.Windows = append(x.st.Windows, perfv1.WindowStatus{Stage: w.Stage, QPS: w.QPS, Concurrency: w.VUs, Variant: v, Arm: w.Arm, Job: name})
	x.act(Action{Kind: ActionCreateJob, Window: w, JobName: name})
	x.wakeAt(x.obs.Now.Add(CacheLag))
	x.waitForStart(&x.st.Windows[len(x.st.Windows)-1])
}

// waitForStart says that the window's load Job was created and its load has
// not started: one message from the creation until the Job's pods run, so the
// status is not written again when the cache shows the Job before its pods
// (at N=1000, four of five treatment windows were written once more for it,
// docs/scale.md).
func (x *decider) waitForStart(rec *perfv1.WindowStatus) {
	if rec.Variant == perfv1.VariantRounds {
		x.wait(fmt.Sprintf("rounds of stage %s: waiting for load Job %s to start", stageName(x.spec, rec.Stage), rec.Job))
		return
	}
	x.wait(fmt.Sprintf("%s window of stage %s: waiting for load Job %s to start", rec.Variant, stageName(x.spec, rec.Stage), rec.Job))
}

// openSettle records a settle period and starts its load at the stage's rate.
// For a runtime toggle the settle clock starts now; for one that rolls the pods
// it starts when the rollout completes.
func (x *decider) openSettle(stage int32, toggleOff bool, arm string) {
	w := x.plan.settleWindow(x.spec, stage, toggleOff, arm)
	name := k6.JobName(x.exp.Name, w)
	rec := perfv1.WindowStatus{Stage: stage, QPS: w.QPS, Concurrency: w.VUs, Variant: perfv1.VariantSettle, Arm: w.Arm, Job: name}
	if !x.spec.Switch().RollsPods() {
		now := x.now()
		rec.Start = &now
	}
	x.st.Windows = append(x.st.Windows, rec)
	x.act(Action{Kind: ActionCreateJob, Window: w, JobName: name})
}

// openRecord is the last window if it is still open.
func (x *decider) openRecord(v perfv1.Variant) *perfv1.WindowStatus {
	if n := len(x.st.Windows); n > 0 {
		if w := &x.st.Windows[n-1]; w.End == nil && w.Variant == v {
			return w
		}
	}
	return nil
}

// measure follows the open window of variant v and reports whether it is done
// and recorded. A window that was never opened (a status written by an older
// decision) is opened now.
func (x *decider) measure(v perfv1.Variant) bool {
	rec := x.openRecord(v)
	if rec == nil {
		x.openWindow(v)
		return false
	}
	w := x.plan.measured(x.spec, rec.Stage, v)
	w.Arm = rec.Arm
	job := x.obs.Jobs[rec.Job]
	switch {
	case job == nil:
		x.jobMissing(rec, w)
		return false
	case job.Failed:
		x.finish(perfv1.PhaseFailed, perfv1.ReasonLoadFailed, fmt.Sprintf("load Job %s failed: %s", job.Name, describe(job)))
		return false
	}
	if rec.Start == nil && job.Started != nil {
		t := metav1Time(*job.Started)
		rec.Start = &t
	}
	if !job.Complete {
		if rec.Start == nil {
			x.waitForStart(rec)
			return false
		}
		due := rec.Start.Add(w.Duration)
		if !x.obs.Now.Before(due.Add(Overdue)) {
			x.finish(perfv1.PhaseFailed, perfv1.ReasonLoadFailed, fmt.Sprintf("load Job %s still running %s after its window should have ended", job.Name, Overdue))
			return false
		}
		x.changesAt(due)
		next := due.Add(JobGrace)
		if !next.After(x.obs.Now) {
			next = x.obs.Now.Add(JobGrace) // late: look again, but never spin
		}
		x.wakeAt(next)
		x.wait(fmt.Sprintf("%s window of stage %s: measuring until %s", v, stageName(x.spec, rec.Stage), due.UTC().Format(time.RFC3339)))
		return false
	}
	if job.ResultsPending {
		if job.Finished != nil && x.obs.Now.Sub(*job.Finished) >= MissingJobTimeout {
			x.finish(perfv1.PhaseFailed, perfv1.ReasonLoadFailed, fmt.Sprintf("load Job %s completed but its pods' results are gone: %s", job.Name, describe(job)))
			return false
		}
		x.wakeAt(x.obs.Now.Add(CacheLag))
		x.wait("reading the results of load Job " + job.Name)
		return false
	}
	return x.record(rec, job, w)
}

// record stores a finished window's results and applies the error-rate guardrail.
func (x *decider) record(rec *perfv1.WindowStatus, job *Job, w k6.Window) bool {
	if len(job.Results) == 0 {
		x.finish(perfv1.PhaseFailed, perfv1.ReasonLoadFailed, fmt.Sprintf("load Job %s completed without readable results: %s", job.Name, describe(job)))
		return false
	}
	load, invalid := k6.Combine(job.Results, w)
	end := x.now()
	if job.Finished != nil {
		end = metav1Time(*job.Finished)
	}
	// k6's own record of when its load began (after its VUs were ready) is more
	// exact than the pod's start: the window starts when the last pod's load did.
	var loadStart time.Time
	for _, r := range job.Results {
		if r != nil && r.Start.After(loadStart) {
			loadStart = r.Start
		}
	}
	if !loadStart.IsZero() {
		start := metav1Time(loadStart)
		rec.Start = &start
	}
	if rec.Start == nil {
		start := metav1Time(end.Add(-w.Duration))
		rec.Start = &start
	}
	rec.End = &end
	rec.Load = &load
	rec.Invalid = append(rec.Invalid, invalid...)
	rec.Invalid = append(rec.Invalid, x.measurementProblems(rec, w)...)
	rec.Valid = boolPtr(len(rec.Invalid) == 0)
	if !*rec.Valid {
		x.event(true, perfv1.ReasonWindowInvalid, "%s window of stage %s is not trustworthy: %v", rec.Variant, stageName(x.spec, rec.Stage), rec.Invalid)
	}
	if x.toggleEverApplied() {
		if msg, bad := x.errorRateBreach(rec); bad {
			x.finish(perfv1.PhaseAborted, perfv1.ReasonErrorRate, msg)
			return false
		}
	}
	return true
}

// jobMissing handles a window whose Job is not observed: right after creation the
// cache may lag; a Job that never started is created again; a Job that vanished
// mid-window means its load was interrupted and the window cannot be trusted.
func (x *decider) jobMissing(rec *perfv1.WindowStatus, w k6.Window) {
	since := x.obs.Now.Sub(x.st.PhaseStartTime.Time)
	switch {
	case rec.Start != nil:
		x.finish(perfv1.PhaseFailed, perfv1.ReasonLoadFailed, fmt.Sprintf("load Job %s disappeared during its window", rec.Job))
	case since < MissingJobTimeout:
		x.wakeAt(x.obs.Now.Add(CacheLag))
		x.wait("waiting for load Job " + rec.Job + " to appear")
	default:
		x.act(Action{Kind: ActionCreateJob, Window: w, JobName: rec.Job})
		x.wakeAt(x.obs.Now.Add(CacheLag))
		x.wait("load Job " + rec.Job + " created again: it never started")
	}
}

// settled follows the Switching and Reverting phases: the rollout (for toggles
// that roll the pods) and then the settle period, both under load.
func (x *decider) settled() bool {
	if x.spec.Switch().RollsPods() {
		r := x.obs.Target.Rollout
		deadline := x.st.PhaseStartTime.Add(x.plan.rolloutTimeout)
		if !r.Complete || r.ObservedGeneration < x.st.Toggle.TargetGeneration {
			if r.Complete {
				r.Message = fmt.Sprintf("waiting for the Deployment controller to observe generation %d", x.st.Toggle.TargetGeneration)
			}
			if r.DeadlineExceeded || !x.obs.Now.Before(deadline) {
				x.finish(perfv1.PhaseAborted, perfv1.ReasonRolloutStuck,
					fmt.Sprintf("rollout of Deployment %s did not complete within %s: %s", x.spec.Target.Deployment, x.plan.rolloutTimeout, r.Message))
				return false
			}
			x.wakeAt(deadline)
			x.wait("rollout of Deployment " + x.spec.Target.Deployment + ": " + r.Message)
			return false
		}
	}
	rec := x.openRecord(perfv1.VariantSettle)
	if rec == nil {
		return true // no settle period: runtime toggle with settle 0s, or after the last stage
	}
	if job := x.obs.Jobs[rec.Job]; job != nil && job.Failed {
		x.finish(perfv1.PhaseFailed, perfv1.ReasonLoadFailed, fmt.Sprintf("settle load Job %s failed: %s", job.Name, describe(job)))
		return false
	}
	if rec.Start == nil {
		now := x.now()
		rec.Start = &now
	}
	end := rec.Start.Add(x.plan.settle)
	if x.obs.Now.Before(end) {
		x.wakeAt(end)
		x.changesAt(end)
		x.wait("settling under load until " + end.UTC().Format(time.RFC3339))
		return false
	}
	now := x.now()
	rec.End = &now
	// Settle load is excluded from results; stop it now, whatever the Jobs
	// policy, rather than let it overlap the next window.
	x.act(Action{Kind: ActionDeleteJob, JobName: rec.Job})
	return true
}

// measurementProblems says why a measured window's resource samples cannot be
// trusted: too few samples (a metrics outage) or the replica count changed.
func (x *decider) measurementProblems(rec *perfv1.WindowStatus, w k6.Window) []string {
	m := x.st.Measurement
	if m == nil || rec.Variant == perfv1.VariantWarmup {
		return nil
	}
	var out []string
	interval, err := x.spec.Metrics.Interval.Parse()
	if err == nil && interval > 0 {
		expected := int(w.Duration / interval)
		covered := 0
		if s := rec.Series; s != nil {
			// Samples left out on purpose were taken: they are not missing.
			covered = int(s.Points)*int(s.StepSeconds)/int(math.Max(1, interval.Seconds())) + int(s.LeftOut)
		}
		// One sample may fall outside the window at either edge.
		if covered*5 < (expected-1)*4 {
			msg := fmt.Sprintf("metrics for only %d of %d samples", covered, expected)
			if m.LastError != "" {
				msg += ": " + m.LastError
			}
			out = append(out, msg)
		}
	}
	if t := x.obs.Target; t != nil && m.Replicas > 0 && t.Replicas != m.Replicas {
		out = append(out, fmt.Sprintf("replicas changed from %d to %d during the window (an autoscaler?)", m.Replicas, t.Replicas))
	}
	return out
}

func stageName(spec *perfv1.PerfExperimentSpec, stage int32) string {
	if stage < 0 {
		return "warm-up"
	}
	return spec.StageName(int(stage))
}

func sortedJobNames(jobs map[string]*Job) []string {
	names := make([]string, 0, len(jobs))
	for n := range jobs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
