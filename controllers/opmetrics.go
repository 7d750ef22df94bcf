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
	// The result series: one info series per experiment, so an alert or a
	// dashboard can name it and read its outcome, and the overhead table.
	// Both come from the persisted status and are dropped on deletion.
	experimentInfo = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "perfexp_experiment_info",
		Help: "1 for every experiment, labelled with its phase, verdict and abort reason (empty unless it ended early).",
	}, []string{"namespace", "experiment", "phase", "verdict", "reason"})
	stageOverhead = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "perfexp_stage_overhead_ratio",
		Help: "Relative overhead (treatment - baseline) / baseline of a finished stage, as a fraction, " +
			"by metric (cpu, memory, p99) and bound (estimate, and the 95 % interval's low and high).",
	}, []string{"namespace", "experiment", "stage", "metric", "bound"})
)

// endingReasons are the (phase, reason) pairs an experiment can end with: the
// engine's finish calls and the guardrails' breach reasons (a test reads them
// from internal/engine and internal/guardrail, so a new one cannot be missed).
// Every pair is exported at 0 from the start: increase() reads a series that
// appears at 1 as no increase, so without them the first abort of each kind
// after an operator start would never alert.
var endingReasons = map[perfv1.Phase][]string{
	perfv1.PhaseSucceeded: {perfv1.ReasonSucceeded},
	perfv1.PhaseFailed:    {perfv1.ReasonLoadFailed, perfv1.ReasonTargetNotFound},
	perfv1.PhaseAborted: {perfv1.ReasonAbortRequested, perfv1.ReasonToggleFailed, perfv1.ReasonRolloutStuck, perfv1.ReasonErrorRate,
		perfv1.ReasonHeapGrowth, perfv1.ReasonMemoryLimit, perfv1.ReasonOOMKilled, perfv1.ReasonRestarts, perfv1.ReasonTargetChanged},
}

func init() {
	ctrlmetrics.Registry.MustRegister(experimentsByPhase, endings, guardrailEvaluations, windowsClosed,
		toggleApplied, windowLatency, experimentInfo, stageOverhead)
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
		experimentInfo.DeletePartialMatch(series)
		stageOverhead.DeletePartialMatch(series)
		infos.Lock()
		delete(infos.m, key)
		infos.Unlock()
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
	info := [3]string{string(st.Phase), string(st.Verdict), reason}
	infos.Lock()
	if old, ok := infos.m[key]; !ok || old != info {
		// The old series is known exactly (infos holds its labels, and no
		// series exists without an entry): a partial match scanned every
		// experiment's, 2.6 % of the CPU at N=1000 (docs/scale.md).
		if ok {
			experimentInfo.DeleteLabelValues(key.Namespace, key.Name, old[0], old[1], old[2])
		}
		experimentInfo.WithLabelValues(key.Namespace, key.Name, info[0], info[1], info[2]).Set(1)
		infos.m[key] = info
	}
	infos.Unlock()
	for _, row := range st.Summary {
		for _, m := range []struct {
			name string
			c    *perfv1.MetricComparison
		}{{"cpu", row.CPU}, {"memory", row.Memory}, {"p99", row.P99}} {
			if m.c == nil {
				continue
			}
			for bound, v := range map[string]float64{"estimate": m.c.Overhead, "low": m.c.CILow, "high": m.c.CIHigh} {
				stageOverhead.WithLabelValues(key.Namespace, key.Name, row.Stage, m.name, bound).Set(v)
			}
		}
	}
}

// infos remembers the labels of each experiment's info series.
var infos = struct {
	sync.Mutex
	m map[types.NamespacedName][3]string
}{m: map[types.NamespacedName][3]string{}}
