package controllers

import (
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
)

// The operator's own metrics, served beside controller-runtime's on the metrics
// endpoint. They are recorded in one place, from the status before and after
// each successful write, so they count what was persisted, never a decision
// that a crash or a conflict threw away.
var (
	experimentsByPhase = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "perfexp_experiments",
		Help: "PerfExperiments known to this operator, by phase.",
	}, []string{"phase"})
	endings = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "perfexp_experiment_endings_total",
		Help: "Experiments that ended, by phase (Succeeded, Failed, Aborted) and reason (the abort reason, or Succeeded).",
	}, []string{"phase", "reason"})
	guardrailEvaluations = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "perfexp_guardrail_evaluations_total",
		Help: "Samples the guardrails judged (every sample from the first toggle on).",
	})
	windowsClosed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "perfexp_windows_total",
		Help: "Measured windows closed, by variant and whether they can be trusted.",
	}, []string{"variant", "valid"})
	// The per-experiment series (experimentSeries, expseries.go): the toggle
	// gauge and the window latency let a dashboard draw latency per window and
	// mark the toggle moments (changes() of the gauge) beside the target's
	// cAdvisor and heap series; the info series names each experiment and its
	// outcome for an alert or a dashboard, and the overhead table follows. All
	// come from the persisted status and are dropped when the experiment is
	// deleted.
	perExperiment = newExperimentSeries()
)

// endingReasons are the (phase, reason) pairs an experiment can end with: the
// engine's finish calls and the guardrails' breach reasons (a test reads them
// from internal/engine and internal/guardrail, so a new one cannot be missed).
// Every pair is exported at 0 from the start: increase() reads a series that
// appears at 1 as no increase, so without them the first abort of each kind
// after an operator start would never alert.
var endingReasons = map[perfv1.Phase][]string{
	perfv1.PhaseSucceeded: {perfv1.ReasonSucceeded},
	perfv1.PhaseFailed:    {perfv1.ReasonLoadFailed, perfv1.ReasonTargetNotFound, perfv1.ReasonInvalidSpec},
	perfv1.PhaseAborted: {perfv1.ReasonAbortRequested, perfv1.ReasonToggleFailed, perfv1.ReasonRolloutStuck, perfv1.ReasonErrorRate,
		perfv1.ReasonHeapGrowth, perfv1.ReasonMemoryLimit, perfv1.ReasonOOMKilled, perfv1.ReasonRestarts, perfv1.ReasonTargetChanged},
}

func init() {
	ctrlmetrics.Registry.MustRegister(experimentsByPhase, endings, guardrailEvaluations, windowsClosed,
		perExperiment)
	for phase, reasons := range endingReasons {
		for _, r := range reasons {
			endings.WithLabelValues(string(phase), r)
		}
	}
	for _, v := range []string{string(perfv1.VariantBaseline), string(perfv1.VariantTreatment)} {
		for _, valid := range []string{"true", "false"} {
			windowsClosed.WithLabelValues(v, valid)
		}
	}
}

// phases remembers each experiment's phase for the by-phase gauge.
var phases = struct {
	sync.Mutex
	m map[types.NamespacedName]perfv1.Phase
}{m: map[types.NamespacedName]perfv1.Phase{}}

// recordWrite updates the metrics for one persisted status change.
func recordWrite(key types.NamespacedName, before, after *perfv1.PerfExperimentStatus, judgedSamples int) {
	setPhase(key, after.Phase)
	if after.Phase.IsTerminal() && !before.Phase.IsTerminal() {
		reason := perfv1.ReasonSucceeded
		if after.Abort != nil {
			reason = after.Abort.Reason
		}
		endings.WithLabelValues(string(after.Phase), reason).Inc()
	}
	guardrailEvaluations.Add(float64(judgedSamples))
	recordResult(key, after)
	if after.Toggle != nil {
		perExperiment.setToggle(key, after.Toggle.Applied)
	}
	for i, w := range after.Windows {
		closedBefore := i < len(before.Windows) && before.Windows[i].End != nil
		if w.End == nil || closedBefore || (w.Variant != perfv1.VariantBaseline && w.Variant != perfv1.VariantTreatment) {
			continue
		}
		valid := "true"
		if w.Valid == nil || !*w.Valid {
			valid = "false"
		}
		windowsClosed.WithLabelValues(string(w.Variant), valid).Inc()
		if w.Load != nil {
			stage := strconv.Itoa(int(w.Stage))
			for _, q := range []struct {
				label string
				ms    float64
			}{{"0.5", w.Load.P50Ms}, {"0.95", w.Load.P95Ms}, {"0.99", w.Load.P99Ms}} {
				perExperiment.setLatency(key, stage, string(w.Variant), q.label, q.ms/1000)
			}
		}
	}
}

// setPhase moves an experiment between phases in the gauge; an empty phase
// forgets it (the experiment is gone).
func setPhase(key types.NamespacedName, p perfv1.Phase) {
	phases.Lock()
	defer phases.Unlock()
	if old, ok := phases.m[key]; ok {
		experimentsByPhase.WithLabelValues(string(old)).Dec()
	}
	if p == "" {
		delete(phases.m, key)
		perExperiment.forget(key)
		return
	}
	phases.m[key] = p
	experimentsByPhase.WithLabelValues(string(p)).Inc()
}

// recordResult exports the experiment's phase, verdict and overhead table as
// the persisted status holds them. The info series is replaced only when its
// labels change, so a scrape never finds it missing while it is rewritten.
func recordResult(key types.NamespacedName, st *perfv1.PerfExperimentStatus) {
	reason := ""
	if st.Abort != nil {
		reason = st.Abort.Reason
	}
	perExperiment.setInfo(key, string(st.Phase), string(st.Verdict), reason)
	for _, row := range st.Summary {
		for _, m := range []struct {
			name string
			c    *perfv1.MetricComparison
		}{{"cpu", row.CPU}, {"memory", row.Memory}, {"p99", row.P99}} {
			if m.c == nil {
				continue
			}
			perExperiment.setOverhead(key, row.Stage, m.name, "estimate", m.c.Overhead)
			perExperiment.setOverhead(key, row.Stage, m.name, "low", m.c.CILow)
			perExperiment.setOverhead(key, row.Stage, m.name, "high", m.c.CIHigh)
		}
	}
}
