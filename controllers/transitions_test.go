package controllers

import (
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
	"perfexp.dev/perf-operator/internal/engine"
)

// captured is a logger whose info lines (verbosity 0 only) are kept.
func captured() (logr.Logger, *[]string) {
	var lines []string
	return funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{Verbosity: 0}), &lines
}

// Each transition of a persisted status is one info line: phase, toggle,
// window opened and closed, abort, stall and queue; nothing else logs.
func TestLogTransitionsOneLineEach(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC))
	baseline := perfv1.WindowStatus{Stage: 0, QPS: 500, Variant: perfv1.VariantBaseline, Job: "e-s0-baseline", Start: &now}
	closed := baseline
	closed.End, closed.Valid, closed.Series = &now, ptr.To(true), &perfv1.WindowSeries{StepSeconds: 15, Points: 120}
	running := perfv1.PerfExperimentStatus{Phase: perfv1.PhaseBaseline, CurrentStage: "1/3 (500qps)", Toggle: &perfv1.ToggleStatus{},
		Windows: []perfv1.WindowStatus{baseline}}
	withConditions := func(st perfv1.PerfExperimentStatus, d engine.Decision) perfv1.PerfExperimentStatus {
		setConditions(&st, nil, 1, d, now.Time)
		return st
	}
	for _, tc := range []struct {
		name          string
		before, after perfv1.PerfExperimentStatus
		want          []string
	}{
		{"nothing changed", running, running, nil},
		{"started", perfv1.PerfExperimentStatus{}, running,
			[]string{`"msg"="phase changed" "from"="Pending" "to"="Baseline"`, `"msg"="window opened" "stage"=0 "qps"=500 "variant"="baseline"`}},
		{"window closed, toggle applied", running, func() perfv1.PerfExperimentStatus {
			st := *running.DeepCopy()
			st.Phase, st.Windows[0] = perfv1.PhaseTreatment, closed
			st.Toggle = &perfv1.ToggleStatus{Applied: true, Pods: []string{"app-0"}}
			return st
		}(), []string{`"msg"="phase changed" "from"="Baseline" "to"="Treatment"`, `"msg"="toggle applied"`, `"pods"=["app-0"]`,
			`"msg"="window closed" "stage"=0 "qps"=500 "variant"="baseline" "valid"=true`, `"points"=120`}},
		{"aborted", func() perfv1.PerfExperimentStatus {
			st := *running.DeepCopy()
			st.Toggle.Applied = true
			return st
		}(), perfv1.PerfExperimentStatus{Phase: perfv1.PhaseAborted, Toggle: &perfv1.ToggleStatus{}, Windows: []perfv1.WindowStatus{baseline},
			Abort: &perfv1.AbortStatus{Reason: perfv1.ReasonHeapGrowth, Message: "heap +712 MiB/min"}},
			[]string{`"msg"="phase changed" "from"="Baseline" "to"="Aborted"`, `"msg"="toggle reverted"`,
				`"msg"="experiment aborted" "phase"="Aborted" "reason"="HeapGrowth" "message"="heap +712 MiB/min"`}},
		{"queued", perfv1.PerfExperimentStatus{}, withConditions(perfv1.PerfExperimentStatus{Phase: perfv1.PhasePending},
			engine.Decision{Waiting: "queued: held by experiment shop/other", WaitReason: perfv1.ReasonQueued}),
			[]string{`"msg"="queued" "message"="queued: held by experiment shop/other"`}},
		{"stalled", perfv1.PerfExperimentStatus{}, withConditions(perfv1.PerfExperimentStatus{Phase: perfv1.PhasePending},
			engine.Decision{Stall: &engine.Stall{Reason: perfv1.ReasonTargetNotFound, Message: "gone"}}),
			[]string{`"msg"="stalled" "reason"="TargetNotFound" "message"="gone"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log, lines := captured()
			logTransitions(log, &tc.before, &tc.after)
			all := strings.Join(*lines, "\n")
			for _, w := range tc.want {
				if !strings.Contains(all, w) {
					t.Errorf("no %s in\n%s", w, all)
				}
			}
			kinds := map[string]int{}
			for _, l := range *lines {
				kinds[l[:strings.Index(l+" ", "\" ")+1]]++
			}
			for k, n := range kinds {
				if n > 1 && !strings.Contains(k, "window") {
					t.Errorf("%d lines for %s:\n%s", n, k, all)
				}
			}
			if len(tc.want) == 0 && len(*lines) != 0 {
				t.Errorf("logged without a transition:\n%s", all)
			}
		})
	}
}
