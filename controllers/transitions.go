package controllers

import (
	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
)

// logTransitions writes one info line for each thing that changed between the
// persisted status before and the one just persisted: the phase, the toggle
// (applied or reverted), each window opened or closed, an abort, a stall or a
// queue. It is called only after the status patch went through, so the log
// says what the cluster holds; a decision that failed to persist logs nothing
// and is logged when it is persisted.
func logTransitions(log logr.Logger, before, after *perfv1.PerfExperimentStatus) {
	if before.Phase != after.Phase && after.Phase != "" {
		from := before.Phase
		if from == "" {
			from = perfv1.PhasePending
		}
		if from != after.Phase {
			log.Info("phase changed", "from", from, "to", after.Phase, "stage", after.CurrentStage, "verdict", after.Verdict)
		}
	}
	wasOn, isOn := toggleOn(before), toggleOn(after)
	switch {
	case !wasOn && isOn:
		log.Info("toggle applied", "stage", after.CurrentStage, "pods", toggledPods(after))
	case wasOn && !isOn:
		log.Info("toggle reverted", "stage", after.CurrentStage)
	}
	for i := range after.Windows {
		w := &after.Windows[i]
		var old *perfv1.WindowStatus
		if i < len(before.Windows) {
			old = &before.Windows[i]
		}
		if old == nil {
			log.Info("window opened", append(windowLoad(w), "variant", w.Variant, "job", w.Job)...)
		}
		if w.End != nil && (old == nil || old.End == nil) {
			points := int32(0)
			if w.Series != nil {
				points = w.Series.Points
			}
			valid := w.Valid == nil || *w.Valid
			log.Info("window closed", append(windowLoad(w), "variant", w.Variant, "valid", valid, "invalid", w.Invalid, "points", points)...)
		}
	}
	if before.Abort == nil && after.Abort != nil {
		log.Info("experiment aborted", "phase", after.Phase, "reason", after.Abort.Reason, "message", after.Abort.Message)
	}
	for _, t := range []string{perfv1.ConditionStalled, perfv1.ConditionReconciling} {
		c, old := trueCondition(after.Conditions, t), trueCondition(before.Conditions, t)
		if c == nil || after.Phase.IsTerminal() || (old != nil && old.Reason == c.Reason) {
			continue
		}
		switch {
		case t == perfv1.ConditionStalled:
			log.Info("stalled", "reason", c.Reason, "message", c.Message)
		case c.Reason == perfv1.ReasonQueued:
			log.Info("queued", "message", c.Message)
		}
	}
}

func toggleOn(st *perfv1.PerfExperimentStatus) bool {
	return st.Toggle != nil && st.Toggle.Applied
}

func toggledPods(st *perfv1.PerfExperimentStatus) []string {
	if st.Toggle == nil {
		return nil
	}
	return st.Toggle.Pods
}

func trueCondition(cs []metav1.Condition, t string) *metav1.Condition {
	if c := meta.FindStatusCondition(cs, t); c != nil && c.Status == metav1.ConditionTrue {
		return c
	}
	return nil
}

// windowLoad is a window's stage and load for a log line: its qps, or the
// closed-loop users of a concurrency stage.
func windowLoad(w *perfv1.WindowStatus) []any {
	if w.Concurrency > 0 {
		return []any{"stage", w.Stage, "concurrency", w.Concurrency}
	}
	return []any{"stage", w.Stage, "qps", w.QPS}
}
