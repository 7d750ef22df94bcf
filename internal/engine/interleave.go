package engine

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"time"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
	"perfexp.dev/perf-operator/internal/k6"
)

// Design interleaved (spec.design): per stage one continuous load Job runs R
// rounds; each round is two slots, one per arm in the round's recorded order,
// and each slot is a settle period followed by a sub-window. The schedule is a
// pure function of the stage's load start and the recorded orders, so an
// operator restarted at any moment finds the slot it is in: a sub-window is
// recorded once (keyed by stage, round and arm), and one whose toggle state
// was wrong at any moment (the operator was down at its switch) is kept,
// marked invalid, never repeated.

// slot is one arm of one round on the stage's clock.
type slot struct {
	round int32
	arm   perfv1.Variant // VariantBaseline or VariantTreatment
	// start is when the slot's settle begins (the switch); measure when its
	// sub-window begins; end when it ends.
	start, measure, end time.Time
}

// interleavingSchedule draws every stage's round orders from the seed: abba
// alternates AB and BA from a seeded first round, random draws each round.
func interleavingSchedule(exp *perfv1.PerfExperiment) *perfv1.InterleavingStatus {
	spec, il := &exp.Spec, exp.Spec.Interleaving
	var seed int64
	if il != nil && il.Seed != nil {
		seed = *il.Seed
	} else {
		h := fnv.New64a()
		h.Write([]byte(exp.Namespace + "/" + exp.Name + "/" + string(exp.UID)))
		seed = int64(h.Sum64() >> 1)
	}
	order := perfv1.DefaultOrder
	if il != nil && il.Order != "" {
		order = il.Order
	}
	st := &perfv1.InterleavingStatus{Seed: seed}
	for s := range spec.Stages {
		r := rand.New(rand.NewPCG(uint64(seed), uint64(s)))
		first := r.IntN(2) == 0
		for k := range spec.RoundsPerStage() {
			ab := first == (k%2 == 0) // abba: alternate from the seeded first round
			if order == perfv1.OrderRandom && k > 0 {
				ab = r.IntN(2) == 0
			}
			o := "BA"
			if ab {
				o = "AB"
			}
			st.Rounds = append(st.Rounds, perfv1.RoundStatus{Stage: int32(s), Round: k, Order: o})
		}
	}
	return st
}

// slots lays out stage's rounds from the load's start.
func (x *decider) slots(stage int32, anchor time.Time) []slot {
	var out []slot
	if x.st.Interleaving == nil {
		return nil
	}
	t := anchor
	for _, r := range x.st.Interleaving.Rounds {
		if r.Stage != stage {
			continue
		}
		for _, c := range r.Order {
			arm := perfv1.VariantBaseline
			d := x.plan.baseline
			if c == 'B' {
				arm, d = perfv1.VariantTreatment, x.plan.treatment
			}
			s := slot{round: r.Round, arm: arm, start: t, measure: t.Add(x.plan.settle)}
			s.end = s.measure.Add(d)
			out = append(out, s)
			t = s.end
		}
	}
	return out
}

// roundsWindow is the continuous load of an interleaved stage: every slot, and
// settleSlack so that the load never stops before the last sub-window closes.
func (x *decider) roundsWindow(stage int32) k6.Window {
	var d time.Duration
	if slots := x.slots(stage, time.Time{}); len(slots) > 0 {
		d = slots[len(slots)-1].end.Sub(time.Time{})
	}
	return stageWindow(x.spec, stage, perfv1.VariantRounds, d+settleSlack)
}

// beginStage starts a stage in the spec's design.
func (x *decider) beginStage(stage int32) {
	x.st.VariantIndex = nil // a stage's variants start again after its first baseline
	if !x.spec.Interleaved() {
		x.enter(perfv1.PhaseBaseline, stage)
		if len(x.spec.Variants) > 0 && stage > 0 && x.plan.settle > 0 {
			// The last variant's revert settled at the previous stage's
			// load, before its closing baseline: the new load settles
			// before this stage's first baseline, as a single toggle's
			// revert settles at the next stage's load.
			x.openSettle(stage, true, "")
			x.baseline()
			return
		}
		x.openWindow(perfv1.VariantBaseline)
		return
	}
	x.enter(x.slotPhase(perfv1.VariantBaseline, false), stage)
	w := x.roundsWindow(stage)
	name := k6.JobName(x.exp.Name, w)
	x.st.Windows = append(x.st.Windows, perfv1.WindowStatus{Stage: stage, QPS: w.QPS, Concurrency: w.VUs, Variant: perfv1.VariantRounds, Job: name})
	x.act(Action{Kind: ActionCreateJob, Window: w, JobName: name})
	x.wakeAt(x.obs.Now.Add(CacheLag))
	x.waitForStart(&x.st.Windows[len(x.st.Windows)-1])
}

// roundsRecord is the stage's rounds record (its continuous load).
func (x *decider) roundsRecord(stage int32) *perfv1.WindowStatus {
	for i := len(x.st.Windows) - 1; i >= 0; i-- {
		if w := &x.st.Windows[i]; w.Variant == perfv1.VariantRounds && w.Stage == stage {
			return w
		}
	}
	return nil
}

// interleaving follows an interleaved stage: its load, its sub-windows on the
// schedule and the toggle each slot wants.
func (x *decider) interleaving() {
	stage := x.stage()
	rec := x.roundsRecord(stage)
	if rec == nil {
		x.beginStage(stage) // a status written before the stage's Job was recorded
		return
	}
	w := x.roundsWindow(stage)
	job := x.obs.Jobs[rec.Job]
	switch {
	case job == nil && rec.Start != nil && x.roundsOver(stage, rec.Start.Time):
		// Deleted by this stage's ending, whose status write was lost: the
		// same ending is decided again.
		x.catchUp(stage, x.slots(stage, rec.Start.Time), x.obs.Now)
		x.endRounds(x.roundsRecord(stage))
		return
	case job == nil:
		x.jobMissing(rec, w)
		return
	case job.Failed:
		x.finish(perfv1.PhaseFailed, perfv1.ReasonLoadFailed, fmt.Sprintf("load Job %s failed: %s", job.Name, describe(job)))
		return
	}
	if rec.Start == nil {
		if job.Started == nil {
			x.waitForStart(rec)
			return
		}
		t := metav1Time(*job.Started)
		rec.Start = &t
	}
	slots := x.slots(stage, rec.Start.Time)
	x.catchUp(stage, slots, x.obs.Now)
	rec = x.roundsRecord(stage) // catchUp may have grown the list
	cur := -1
	for i, s := range slots {
		if x.obs.Now.Before(s.end) {
			cur = i
			break
		}
	}
	if cur < 0 {
		x.endRounds(rec)
		return
	}
	if job.Complete {
		x.finish(perfv1.PhaseFailed, perfv1.ReasonLoadFailed, fmt.Sprintf("load Job %s ended before the rounds of stage %s did", job.Name, stageName(x.spec, stage)))
		return
	}
	s := slots[cur]
	if want := x.wantOn(s.arm); want != x.toggleOn() {
		x.switchToggle(want, stage)
		if late := x.obs.Now.Sub(s.measure); late > 0 {
			if sub := x.subWindow(stage, s.round, s.arm); sub != nil {
				x.invalidate(sub, fmt.Sprintf("toggle switched %s into the sub-window", late.Round(time.Second)))
			}
		}
	}
	settling := x.obs.Now.Before(s.measure)
	if p := x.slotPhase(s.arm, settling); p != x.st.Phase {
		x.enter(p, stage)
	}
	next := s.end
	if settling {
		next = s.measure
	}
	x.wakeAt(next)
	x.changesAt(next)
	what := "measuring"
	if settling {
		what = "settling"
	}
	x.wait(fmt.Sprintf("stage %s round %d/%d: %s the %s arm until %s", stageName(x.spec, stage), s.round+1,
		x.spec.RoundsPerStage(), what, s.arm, next.UTC().Format(time.RFC3339)))
}

// roundsOver reports whether every slot of the stage has ended.
func (x *decider) roundsOver(stage int32, anchor time.Time) bool {
	slots := x.slots(stage, anchor)
	return len(slots) > 0 && !x.obs.Now.Before(slots[len(slots)-1].end)
}

// slotPhase is the phase shown for an arm: Switching/Reverting while it
// settles, Baseline/Treatment while it is measured.
func (x *decider) slotPhase(arm perfv1.Variant, settling bool) perfv1.Phase {
	switch {
	case arm == perfv1.VariantTreatment && settling:
		return perfv1.PhaseSwitching
	case arm == perfv1.VariantTreatment:
		return perfv1.PhaseTreatment
	case settling:
		return perfv1.PhaseReverting
	}
	return perfv1.PhaseBaseline
}

// wantOn is whether the toggle must be on in an arm: in the treatment arm,
// unless the run calibrates (A/A).
func (x *decider) wantOn(arm perfv1.Variant) bool {
	return arm == perfv1.VariantTreatment && !x.spec.Calibrate
}

func (x *decider) toggleOn() bool { return x.st.Toggle != nil && x.st.Toggle.Applied }

// lastSwitch is when the toggle last changed state (zero: never).
func (x *decider) lastSwitch() time.Time {
	var t time.Time
	if tg := x.st.Toggle; tg != nil {
		if tg.AppliedAt != nil {
			t = tg.AppliedAt.Time
		}
		if tg.RevertedAt != nil && tg.RevertedAt.After(t) {
			t = tg.RevertedAt.Time
		}
	}
	return t
}

func (x *decider) switchToggle(on bool, stage int32) {
	if on {
		x.applyToggle(stage)
		return
	}
	x.revert()
}

// applyToggle switches the current arm's toggle on (spec.toggle, or the
// variant being measured) and records which one it is.
func (x *decider) applyToggle(stage int32) {
	arm := x.arm()
	x.act(Action{Kind: ActionApplyToggle, Original: x.st.Toggle.Original, Toggle: arm.Toggle})
	now := x.now()
	x.st.Toggle.Applied = true
	x.st.Toggle.AppliedAt = &now
	x.st.Toggle.Variant = arm.Name
	if arm.Name != "" {
		x.event(false, perfv1.ReasonToggleOn, "variant %s applied to Deployment %s for stage %s", arm.Name, x.spec.Target.Deployment, x.spec.StageName(int(stage)))
		return
	}
	x.event(false, perfv1.ReasonToggleOn, "toggle applied to Deployment %s for stage %s", x.spec.Target.Deployment, x.spec.StageName(int(stage)))
}

// catchUp records every sub-window of the stage that began by t and closes
// every one that ended by t, in schedule order. It runs for every sample's
// time before the sample is placed, and for the decision's time before the
// toggle is switched, so a sub-window's toggle state is judged before any
// later switch.
func (x *decider) catchUp(stage int32, slots []slot, t time.Time) {
	rec := *x.roundsRecord(stage)
	for _, s := range slots {
		if t.Before(s.measure) {
			return
		}
		sub := x.subWindow(stage, s.round, s.arm)
		if sub == nil {
			start := metav1Time(s.measure)
			round := s.round
			x.st.Windows = append(x.st.Windows, perfv1.WindowStatus{Stage: stage, QPS: rec.QPS, Concurrency: rec.Concurrency, Variant: s.arm, Round: &round, Job: rec.Job, Start: &start})
			sub = &x.st.Windows[len(x.st.Windows)-1]
		}
		if sub.End == nil && !t.Before(s.end) {
			x.closeSubWindow(sub, s)
		}
	}
}

// closeSubWindow ends a sub-window at its planned end and judges it: its
// samples (as any window's) and the toggle, which must have been in the
// arm's state from before the sub-window began.
func (x *decider) closeSubWindow(sub *perfv1.WindowStatus, s slot) {
	end := metav1Time(s.end)
	sub.End = &end
	if x.toggleOn() != x.wantOn(s.arm) || x.lastSwitch().After(s.measure) {
		sub.Invalid = appendOnce(sub.Invalid, "the toggle was not in the arm's state for the whole sub-window (was the operator down at a switch?)")
	}
	x.liveAtClose(sub)
	sub.Load = liveLoad(sub)
	sub.LiveStart, sub.LiveEnd = nil, nil
	sub.Invalid = append(sub.Invalid, x.measurementProblems(sub, x.plan.measured(x.spec, sub.Stage, sub.Variant))...)
	sub.Valid = boolPtr(len(sub.Invalid) == 0)
	if !*sub.Valid {
		x.event(true, perfv1.ReasonWindowInvalid, "%s sub-window of stage %s round %d is not trustworthy: %v", sub.Variant, stageName(x.spec, sub.Stage), *sub.Round+1, sub.Invalid)
	}
}

func (x *decider) invalidate(sub *perfv1.WindowStatus, why string) {
	sub.Invalid = appendOnce(sub.Invalid, why)
	if sub.End != nil {
		sub.Valid = boolPtr(false)
	}
}

func appendOnce(list []string, s string) []string {
	for _, v := range list {
		if v == s {
			return list
		}
	}
	return append(list, s)
}

// subWindow is the record of one arm of one round.
func (x *decider) subWindow(stage, round int32, arm perfv1.Variant) *perfv1.WindowStatus {
	for i := range x.st.Windows {
		w := &x.st.Windows[i]
		if w.Stage == stage && w.Variant == arm && w.Round != nil && *w.Round == round {
			return w
		}
	}
	return nil
}

// endRounds ends an interleaved stage: its load stops, the toggle goes off,
// and the next stage begins (or the analysis).
func (x *decider) endRounds(rec *perfv1.WindowStatus) {
	stage := rec.Stage
	now := x.now()
	rec.End = &now
	rec.Valid = boolPtr(true)
	x.act(Action{Kind: ActionDeleteJob, JobName: rec.Job})
	if x.toggleOn() || (x.st.Toggle != nil && len(x.st.Toggle.Pods) > 0) {
		x.revert()
	}
	next := stage + 1
	if next >= int32(len(x.spec.Stages)) {
		x.enter(perfv1.PhaseAnalyzing, stage)
		x.analyzing()
		return
	}
	x.resetGuard()
	x.beginStage(next)
}

// sampleInterleaved places one instant's samples of an interleaved stage: it
// first brings the sub-windows up to the instant, then returns the sub-window
// the instant falls in (nil: a settle period, or no stage load yet).
func (x *decider) sampleInterleaved(t time.Time) *perfv1.WindowStatus {
	rec := x.roundsRecord(x.stage())
	if rec == nil || rec.Start == nil || rec.End != nil {
		return nil
	}
	stage := rec.Stage
	slots := x.slots(stage, rec.Start.Time)
	x.catchUp(stage, slots, t)
	for _, s := range slots {
		if !t.Before(s.measure) && t.Before(s.end) {
			return x.subWindow(stage, s.round, s.arm)
		}
	}
	return nil
}
