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
	// The two per-experiment series below let a dashboard draw latency per window
	// and mark the toggle moments (changes() of the gauge) beside the target's
	// cAdvisor and heap series. Both are dropped when the experiment is deleted.
	toggleApplied = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "perfexp_toggle_applied",
		Help: "1 while the experiment's toggle is in effect on its target, else 0.",
	}, []string{"namespace", "experiment"})
	windowLatency = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "perfexp_window_latency_seconds",
		Help: "Latency percentiles of the experiment's last closed window per stage and variant (from the k6 results).",
	}, []string{"namespace", "experiment", "stage", "variant", "quantile"})
)

func init() {
	ctrlmetrics.Registry.MustRegister(experimentsByPhase, endings, guardrailEvaluations, windowsClosed,
		toggleApplied, windowLatency)
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
	if after.Toggle != nil {
		applied := 0.0
		if after.Toggle.Applied {
			applied = 1
		}
		toggleApplied.WithLabelValues(key.Namespace, key.Name).Set(applied)
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
				windowLatency.WithLabelValues(key.Namespace, key.Name, stage, string(w.Variant), q.label).Set(q.ms / 1000)
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
		series := prometheus.Labels{"namespace": key.Namespace, "experiment": key.Name}
		toggleApplied.DeletePartialMatch(series)
		windowLatency.DeletePartialMatch(series)
		return
	}
	phases.m[key] = p
	experimentsByPhase.WithLabelValues(string(p)).Inc()
}
