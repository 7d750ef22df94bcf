package controllers

import (
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
	"perfexp.dev/perf-operator/internal/metrics"
)

func TestOperatorMetricsCountWhatWasPersisted(t *testing.T) {
	key := types.NamespacedName{Namespace: "shop", Name: "m"}
	t0 := time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *metav1.Time { v := metav1.NewTime(t0.Add(d)); return &v }
	yes, no := true, false

	baseline := perfv1.PerfExperimentStatus{Phase: perfv1.PhaseBaseline, Toggle: &perfv1.ToggleStatus{},
		Windows: []perfv1.WindowStatus{{Variant: perfv1.VariantBaseline, Start: at(0)}}}
	recordWrite(key, &perfv1.PerfExperimentStatus{}, &baseline, 0)
	if got := testutil.ToFloat64(experimentsByPhase.WithLabelValues("Baseline")); got != 1 {
		t.Fatalf("Baseline gauge %v", got)
	}

	// The baseline window closes valid; the toggle goes on and two sample
	// instants after it are persisted.
	treat := baseline.DeepCopy()
	treat.Phase = perfv1.PhaseTreatment
	treat.Toggle.AppliedAt, treat.Toggle.Applied = at(time.Minute), true
	treat.Windows[0].End, treat.Windows[0].Valid = at(time.Minute), &yes
	treat.Windows[0].Load = &perfv1.LoadResult{P50Ms: 4, P95Ms: 9, P99Ms: 12.5}
	treat.Windows = append(treat.Windows, perfv1.WindowStatus{Variant: perfv1.VariantTreatment, Start: at(2 * time.Minute)})
	p := &pending{samples: []metrics.Sample{
		{Time: t0.Add(30 * time.Second), Pod: "a"},                                             // before the toggle
		{Time: t0.Add(75 * time.Second), Pod: "a"}, {Time: t0.Add(75 * time.Second), Pod: "b"}, // one instant, two pods
		{Time: t0.Add(90 * time.Second), Pod: "a"},
	}}
	evals := testutil.ToFloat64(guardrailEvaluations)
	recordWrite(key, &baseline, treat, judged(&baseline, treat, p))
	if got := testutil.ToFloat64(guardrailEvaluations) - evals; got != 2 {
		t.Fatalf("guardrail evaluations +%v; want 2 instants", got)
	}
	if testutil.ToFloat64(experimentsByPhase.WithLabelValues("Baseline")) != 0 ||
		testutil.ToFloat64(experimentsByPhase.WithLabelValues("Treatment")) != 1 {
		t.Fatal("phase gauge did not move")
	}
	if got := testutil.ToFloat64(windowsClosed.WithLabelValues("baseline", "true")); got != 1 {
		t.Fatalf("closed baseline windows %v", got)
	}
	if got := seriesValue(t, "perfexp_toggle_applied", key, ""); got != 1 {
		t.Fatalf("toggle gauge %v while applied", got)
	}
	if got := seriesValue(t, "perfexp_window_latency_seconds", key, "quantile=0.99,stage=0,variant=baseline"); got != 0.0125 {
		t.Fatalf("baseline p99 gauge %v s; want 0.0125", got)
	}
	wantSeries(t, "perfexp_experiment_info", key, map[string]float64{"phase=Treatment,reason=,verdict=": 1})

	// A guardrail ends it; writing the same terminal status again counts nothing.
	aborted := treat.DeepCopy()
	aborted.Phase = perfv1.PhaseAborted
	aborted.Abort = &perfv1.AbortStatus{Reason: perfv1.ReasonHeapGrowth}
	aborted.Toggle.Applied = false
	aborted.Windows[1].End, aborted.Windows[1].Valid = at(3*time.Minute), &no
	aborted.Verdict = perfv1.VerdictInconclusive
	aborted.Summary = []perfv1.StageSummary{{Stage: "500", QPS: 500,
		CPU: &perfv1.MetricComparison{Overhead: 0.041, CILow: 0.02, CIHigh: 0.06},
		P99: &perfv1.MetricComparison{Overhead: -0.01, CILow: -0.05, CIHigh: 0.03}}}
	recordWrite(key, treat, aborted, 0)
	recordWrite(key, aborted, aborted, 0)
	if got := testutil.ToFloat64(endings.WithLabelValues("Aborted", perfv1.ReasonHeapGrowth)); got != 1 {
		t.Fatalf("aborts by HeapGrowth %v", got)
	}
	if got := testutil.ToFloat64(windowsClosed.WithLabelValues("treatment", "false")); got != 1 {
		t.Fatalf("closed invalid treatment windows %v", got)
	}
	if got := seriesValue(t, "perfexp_toggle_applied", key, ""); got != 0 {
		t.Fatalf("toggle gauge %v after the revert", got)
	}
	// The info series moved (the Treatment one is gone, never two at once);
	// the overhead table is there per stage, metric and bound.
	wantSeries(t, "perfexp_experiment_info", key, map[string]float64{"phase=Aborted,reason=HeapGrowth,verdict=Inconclusive": 1})
	wantSeries(t, "perfexp_stage_overhead_ratio", key, map[string]float64{
		"bound=estimate,metric=cpu,stage=500": 0.041, "bound=low,metric=cpu,stage=500": 0.02, "bound=high,metric=cpu,stage=500": 0.06,
		"bound=estimate,metric=p99,stage=500": -0.01, "bound=low,metric=p99,stage=500": -0.05, "bound=high,metric=p99,stage=500": 0.03,
	})
	setPhase(key, "") // deleted
	if got := testutil.ToFloat64(experimentsByPhase.WithLabelValues("Aborted")); got != 0 {
		t.Fatalf("a deleted experiment still counted: %v", got)
	}
	if n := len(series(t, "perfexp_toggle_applied", key)) + len(series(t, "perfexp_window_latency_seconds", key)); n != 0 {
		t.Fatalf("%d per-experiment series left after deletion", n)
	}
	wantSeries(t, "perfexp_experiment_info", key, map[string]float64{})
	wantSeries(t, "perfexp_stage_overhead_ratio", key, map[string]float64{})
}

// wantSeries compares the series of one metric that belong to an experiment,
// keyed by their other labels ("name=value,..." sorted), with what is wanted.
func wantSeries(t *testing.T, metric string, key types.NamespacedName, want map[string]float64) {
	t.Helper()
	if got := series(t, metric, key); !maps.Equal(got, want) {
		t.Errorf("%s of %s: %v, want %v", metric, key, got, want)
	}
}

// seriesValue is the value of one series of an experiment, named by its other
// labels as in wantSeries; the test fails when there is no such series.
func seriesValue(t *testing.T, metric string, key types.NamespacedName, labels string) float64 {
	t.Helper()
	v, ok := series(t, metric, key)[labels]
	if !ok {
		t.Fatalf("no series %s{%s} of %s", metric, labels, key)
	}
	return v
}

// series gathers the series of one metric that belong to an experiment, as
// the metrics endpoint serves them, keyed by their other labels.
func series(t *testing.T, metric string, key types.NamespacedName) map[string]float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		if f.GetName() != metric {
			continue
		}
		for _, m := range f.GetMetric() {
			var ns, exp string
			var rest []string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "namespace":
					ns = l.GetValue()
				case "experiment":
					exp = l.GetValue()
				default:
					rest = append(rest, l.GetName()+"="+l.GetValue())
				}
			}
			if ns == key.Namespace && exp == key.Name {
				got[strings.Join(rest, ",")] = m.GetGauge().GetValue()
			}
		}
	}
	return got
}

// Every way an experiment can end is exported at 0 from the start, so the
// first abort of a kind is an increase Prometheus sees. The ways are read from
// the code that ends experiments: the engine's finish calls, and the
// guardrails' breach reasons (which end it Aborted).
func TestMetricsEndingsExportedFromTheStart(t *testing.T) {
	finish := regexp.MustCompile(`finish\(perfv1\.Phase(\w+), perfv1\.Reason(\w+)`)
	breach := regexp.MustCompile(`Breach\{Reason: perfv1\.Reason(\w+)`)
	want := map[[2]string]bool{}
	scan := func(dir string, re *regexp.Regexp, phase string) {
		files, err := filepath.Glob(filepath.Join("..", "internal", dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		found := 0
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range re.FindAllStringSubmatch(string(b), -1) {
				p, r := phase, m[len(m)-1]
				if len(m) == 3 {
					p = m[1]
				}
				want[[2]string{p, r}] = true
				found++
			}
		}
		if found == 0 {
			t.Fatalf("found no endings in internal/%s: has the way experiments end changed? Update this test and endingReasons", dir)
		}
	}
	scan("engine", finish, "")
	scan("guardrail", breach, string(perfv1.PhaseAborted))

	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	exported := map[[2]string]bool{}
	for _, f := range families {
		if f.GetName() != "perfexp_experiment_endings_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			var k [2]string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "phase":
					k[0] = l.GetValue()
				case "reason":
					k[1] = l.GetValue()
				}
			}
			exported[k] = true
		}
	}
	for k := range want {
		if !exported[k] {
			t.Errorf("experiments can end %s with reason %s, but perfexp_experiment_endings_total{phase=%q,reason=%q} is not exported from the start: add it to endingReasons", k[0], k[1], k[0], k[1])
		}
	}
	if len(exported) < len(want) {
		t.Errorf("exported %d endings, the code has %d", len(exported), len(want))
	}
	t.Logf("%d endings exported from the start, %d found in the code", len(exported), len(want))
}
