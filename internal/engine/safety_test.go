package engine

import (
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
)

func kinds(d Decision) []ActionKind {
	var out []ActionKind
	for _, a := range d.Actions {
		out = append(out, a.Kind)
	}
	return out
}

// Someone else's change to a held target (its lock annotations dropped by a
// replace, its template changed by rollout undo or set env) aborts the run
// with TargetChanged, stops the load before reverting, and still reverts from
// the recorded original.
func TestForeignEditsAbortAndTheRevertStillRuns(t *testing.T) {
	for _, tc := range []struct {
		name  string
		exp   func() *perfv1.PerfExperiment
		edit  func(w *world)
		phase perfv1.Phase
		inMsg string
		// revert: whether anything may be on to revert (a runtime toggle in
		// its baseline has nothing on, and its lock is gone).
		revert bool
	}{
		{"replace drops the lock mid-treatment", envExperiment, func(w *world) { w.heldBy = "" }, perfv1.PhaseTreatment, "lock annotations", true},
		{"replace drops the lock mid-baseline (http)", seedExperiment, func(w *world) { w.heldBy = "" }, perfv1.PhaseBaseline, "lock annotations", false},
		{"replace drops the lock mid-treatment (http)", seedExperiment, func(w *world) { w.heldBy = "" }, perfv1.PhaseTreatment, "lock annotations", true},
		{"rollout undo mid-treatment", envExperiment, func(w *world) { w.changed = "the pod template of Deployment mall-gateway was changed by someone else" }, perfv1.PhaseTreatment, "pod template", true},
		{"set env mid-baseline", envExperiment, func(w *world) { w.changed = "the pod template of Deployment mall-gateway was changed by someone else" }, perfv1.PhaseBaseline, "pod template", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, tc.exp())
			w.runUntil(tc.phase)
			tc.edit(w)
			d := w.step()
			st := w.exp.Status
			if st.Phase != perfv1.PhaseAborted || st.Abort == nil || st.Abort.Reason != perfv1.ReasonTargetChanged || !strings.Contains(st.Abort.Message, tc.inMsg) {
				t.Fatalf("phase %s abort %+v", st.Phase, st.Abort)
			}
			k := kinds(d)
			rev := slices.Index(k, ActionRevertToggle)
			if (rev >= 0) != tc.revert {
				t.Fatalf("revert %v in %v", tc.revert, k)
			}
			if rev < 0 {
				rev = len(k)
			}
			for i, a := range d.Actions {
				if a.Kind == ActionDeleteJob && i > rev {
					t.Errorf("load stopped after the revert: %v", k)
				}
				if a.Kind == ActionRevertToggle && a.Original != `{"kind":"test"}` {
					t.Errorf("revert from %q, not the recorded original", a.Original)
				}
			}
			if !slices.Contains(k, ActionReleaseLock) {
				t.Errorf("no release (lock or its label) in %v", k)
			}
			if w.applied || len(w.jobs) != 0 {
				t.Errorf("left behind: applied %v, jobs %v", w.applied, w.jobs)
			}
			for _, win := range st.Windows {
				if win.Variant != perfv1.VariantSettle && win.Load == nil && (win.Valid == nil || *win.Valid) {
					t.Errorf("window %d/%s trusted after the edit: %+v", win.Stage, win.Variant, win)
				}
			}
		})
	}
}

// Losing the lock by our own release, with the status write of that ending
// lost, is not a foreign edit: the same ending is decided again.
func TestOwnReleaseWithTheStatusLostIsNotATargetChange(t *testing.T) {
	w := newWorld(t, seedExperiment())
	w.runUntil(perfv1.PhaseTreatment)
	w.exp.Spec.Abort = true
	w.loseStatusAt = w.decisions + 1
	w.step() // reverts, releases; the status write is lost
	if w.heldBy != "" || w.exp.Status.Phase.IsTerminal() {
		t.Fatalf("setup: lock %q phase %s", w.heldBy, w.exp.Status.Phase)
	}
	w.step()
	if st := w.exp.Status; st.Phase != perfv1.PhaseAborted || st.Abort.Reason != perfv1.ReasonAbortRequested {
		t.Fatalf("phase %s abort %+v; want the requested abort to stand", st.Phase, st.Abort)
	}
}

// Pods recorded in status.toggle.pods (sent the toggle, maybe not switched
// back) are reverted on every ending, whatever status.toggle.applied says.
func TestRecordedPodsAreRevertedOnEveryEnding(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(w *world)
	}{
		{"abort", func(w *world) { w.exp.Spec.Abort = true }},
		{"deletion", func(w *world) { now := metav1.NewTime(w.now); w.exp.DeletionTimestamp = &now }},
		{"refused apply", func(w *world) { w.toggleError = "pod app-1: POST /admin/profiling answered 409 Conflict" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, seedExperiment())
			w.runUntil(perfv1.PhaseBaseline)
			w.exp.Status.Toggle.Pods = []string{"app-1", "app-2"} // intent written, then a crash
			tc.end(w)
			d := w.step()
			var pods []string
			for _, a := range d.Actions {
				if a.Kind == ActionRevertToggle {
					pods = a.Pods
				}
			}
			if !slices.Equal(pods, []string{"app-1", "app-2"}) {
				t.Fatalf("revert reaches %v; want both recorded pods (%v)", pods, kinds(d))
			}
		})
	}
}

// A revert failing for guardrails.revertTimeout is handed to
// toggle.onRevertFailure: RestartPods deletes the pods, Keep leaves them; before
// the timeout the revert is tried again.
func TestAFailingRevertEscalatesAfterItsTimeout(t *testing.T) {
	for _, tc := range []struct {
		name     string
		policy   perfv1.RevertFailurePolicy
		since    time.Duration
		want     []ActionKind
		outcome  string
		podsLeft int
	}{
		{"before the timeout", perfv1.RevertFailureRestartPods, time.Minute, []ActionKind{ActionRevertToggle}, "", 2},
		{"RestartPods", perfv1.RevertFailureRestartPods, 3 * time.Minute, []ActionKind{ActionDeletePods}, perfv1.ReasonPodsRestarted, 0},
		{"Keep", perfv1.RevertFailureKeep, 3 * time.Minute, nil, perfv1.ReasonRevertAbandoned, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, seedExperiment())
			w.exp.Spec.Toggle.OnRevertFailure = tc.policy
			w.runUntil(perfv1.PhaseTreatment)
			w.exp.Spec.Abort = true
			w.exp.Status.Toggle.Pods = []string{"app-1", "app-2"}
			meta.SetStatusCondition(&w.exp.Status.Conditions, metav1.Condition{Type: perfv1.ConditionRevertFailing, Status: metav1.ConditionTrue,
				Reason: perfv1.ReasonRevertFailing, Message: "500", LastTransitionTime: metav1.NewTime(w.now.Add(-tc.since))})
			d := w.step()
			var got []ActionKind
			for _, k := range kinds(d) {
				if k == ActionRevertToggle || k == ActionDeletePods {
					got = append(got, k)
				}
			}
			if !slices.Equal(got, tc.want) || d.RevertOutcome != tc.outcome {
				t.Fatalf("actions %v outcome %q; want %v %q", kinds(d), d.RevertOutcome, tc.want, tc.outcome)
			}
			if n := len(d.Status.Toggle.Pods); n != tc.podsLeft {
				t.Errorf("%d pods left recorded; want %d", n, tc.podsLeft)
			}
			if d.Status.Phase != perfv1.PhaseAborted {
				t.Errorf("phase %s; the run ends either way", d.Status.Phase)
			}
		})
	}
}

// A target deleted mid-run took its pods, and the toggle with them: the run
// fails with TargetNotFound and status no longer says the toggle is applied.
func TestTargetDeletedMidRunLeavesNothingApplied(t *testing.T) {
	for _, exp := range []func() *perfv1.PerfExperiment{seedExperiment, envExperiment} {
		w := newWorld(t, exp())
		w.runUntil(perfv1.PhaseTreatment)
		w.exp.Status.Toggle.Pods = []string{"app-1", "app-2"}
		w.targetExists = false
		d := w.step()
		st := w.exp.Status
		if st.Phase != perfv1.PhaseFailed || st.Abort == nil || st.Abort.Reason != perfv1.ReasonTargetNotFound {
			t.Fatalf("phase %s abort %+v", st.Phase, st.Abort)
		}
		if st.Toggle.Applied || len(st.Toggle.Pods) != 0 {
			t.Errorf("status says the toggle is on a target that is gone: %+v", st.Toggle)
		}
		if slices.Contains(kinds(d), ActionRevertToggle) || slices.Contains(kinds(d), ActionReleaseLock) {
			t.Errorf("acted on a target that is gone: %v", kinds(d))
		}
	}
}

// What only the operator can check in the spec (a query template misusing a
// placeholder) stalls preflight before anything is locked.
func TestAnInvalidQueryStallsInPreflight(t *testing.T) {
	w := newWorld(t, seedExperiment())
	obs := w.observe()
	obs.InvalidSpec = `spec.metrics.queries: heap query: {{pod}} outside a quoted string`
	d := Decide(w.exp, obs)
	if d.Stall == nil || d.Stall.Reason != perfv1.ReasonInvalidSpec || !strings.Contains(d.Stall.Message, "spec.metrics.queries") {
		t.Fatalf("stall %+v", d.Stall)
	}
	if len(d.Actions) != 0 {
		t.Fatalf("actions %v before the spec could run", kinds(d))
	}
}
