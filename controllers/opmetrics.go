package controllers

import (
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
)

func init() {
	ctrlmetrics.Registry.MustRegister(experimentsByPhase, endings, guardrailEvaluations, windowsClosed)
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
		return
	}
	phases.m[key] = p
	experimentsByPhase.WithLabelValues(string(p)).Inc()
}
