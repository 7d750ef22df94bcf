package main

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
	"perfexp.dev/perf-operator/internal/analysis"
)

func plannedExperiment(design perfv1.Design) *perfv1.PerfExperiment {
	f := func(v float64) *float64 { return &v }
	exp := &perfv1.PerfExperiment{
		ObjectMeta: metav1.ObjectMeta{Name: "profiling-aa", Namespace: "shop"},
		Spec: perfv1.PerfExperimentSpec{
			Stages:    []perfv1.StageSpec{{QPS: 500}, {QPS: 1000}},
			Design:    design,
			Calibrate: true,
			Windows:   perfv1.WindowsSpec{Baseline: "1m", Treatment: "1m", Settle: "15s"},
		},
		Status: perfv1.PerfExperimentStatus{Phase: perfv1.PhaseSucceeded, Summary: []perfv1.StageSummary{
			{Stage: "500", CPU: &perfv1.MetricComparison{MDE: f(0.04)}, Memory: &perfv1.MetricComparison{MDE: f(0.01)}},
			{Stage: "1000", CPU: &perfv1.MetricComparison{MDE: f(0.02)}, Memory: &perfv1.MetricComparison{}},
		}},
	}
	if design == perfv1.DesignInterleaved {
		exp.Spec.Interleaving = &perfv1.InterleavingSpec{Rounds: 4}
		exp.Status.Interleaving = &perfv1.InterleavingStatus{Seed: 7, Rounds: []perfv1.RoundStatus{
			{Stage: 0, Round: 0, Order: "AB"}, {Stage: 0, Round: 1, Order: "BA"}, {Stage: 1, Round: 0, Order: "BA"}, {Stage: 1, Round: 1, Order: "AB"}}}
	}
	return exp
}

func TestPlan(t *testing.T) {
	for _, tc := range []struct {
		name   string
		design perfv1.Design
		o      planOptions
		want   []string
		err    string
		// prometheus samples every 15 s through Prometheus.
		prometheus bool
	}{
		{name: "rounds for 2 %", design: perfv1.DesignInterleaved, o: planOptions{effect: "2%"},
			want: []string{"interleaved, 4 rounds of 1m0s + 1m0s sub-windows", "noise floor", "ROUNDS FOR 2%", "25m0s", "10m0s"}},
		{name: "MDE at 16 rounds", design: perfv1.DesignInterleaved, o: planOptions{rounds: 16},
			want: []string{"CPU MDE AT 16 ROUNDS", "40m0s"}},
		{name: "windows for 1 %", design: perfv1.DesignSequential, o: planOptions{effect: "1%"},
			want: []string{"sequential, 1m0s + 1m0s windows", "WINDOWS FOR 1%", "16m0s", "4m0s"}},
		{name: "MDE at 4 times the window halves it", design: perfv1.DesignSequential, o: planOptions{window: 4 * 60e9},
			want: []string{"CPU MDE AT 4m0s", "2.0%", "1.0%"}},
		{name: "rounds of a sequential run", design: perfv1.DesignSequential, o: planOptions{rounds: 8}, err: "--rounds is for the interleaved design"},
		{name: "window of an interleaved run", design: perfv1.DesignInterleaved, o: planOptions{window: 60e9}, err: "--window is for the sequential design"},
		{name: "bad effect", design: perfv1.DesignSequential, o: planOptions{effect: "0%"}, err: "--effect \"0%\""},
		// A plan never names windows admission refuses: through Prometheus at
		// 15 s, 2m30s (perfv1.MinMeasuredWindow).
		{name: "windows for 10 % no shorter than admission takes", design: perfv1.DesignSequential, o: planOptions{effect: "10%"}, prometheus: true,
			want: []string{"WINDOWS FOR 10%", "2m30s", "5m30s"}},
		{name: "window shorter than admission takes", design: perfv1.DesignSequential, o: planOptions{window: 60e9}, prometheus: true,
			err: "--window 1m0s: must be at least 2m30s long"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			exp := plannedExperiment(tc.design)
			if tc.prometheus {
				exp.Spec.Metrics = perfv1.MetricsSpec{Source: perfv1.MetricsSourceAuto, Interval: "15s", Prometheus: &perfv1.PrometheusSpec{URL: "http://prometheus:9090"}}
			}
			err := writePlan(&b, exp, tc.o)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v; want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Log("\n" + b.String())
			for _, w := range tc.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("plan lacks %q", w)
				}
			}
		})
	}
	// The rounds the plan gives for the 4 % stage are more than it ran.
	var b bytes.Buffer
	if err := writePlan(&b, plannedExperiment(perfv1.DesignInterleaved), planOptions{effect: "2%"}); err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(b.String(), "\n") {
		if f := strings.Fields(l); len(f) == 5 && f[0] == "500" && (f[3] == "4" || f[3] == "2" || f[3] == "3") {
			t.Errorf("stage 500 needs more than 4 rounds to halve its MDE: %q", l)
		}
	}
}

func TestReportNamesTheDesignAndTheMDE(t *testing.T) {
	exp := plannedExperiment(perfv1.DesignInterleaved)
	var b bytes.Buffer
	if err := printReport(&b, exp); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"could detect (80% power): 500: CPU ≥ 4.0%, memory ≥ 1.0%; 1000: CPU ≥ 2.0%",
		"calibration (A/A)", "design interleaved (seed 7), rounds: 500 AB BA; 1000 BA AB"} {
		if !strings.Contains(b.String(), w) {
			t.Errorf("report lacks %q:\n%s", w, b.String())
		}
	}
}

// TestInterleavedMarkers: the toggle is marked where the arm changes, not at
// every sub-window's end.
func TestInterleavedMarkers(t *testing.T) {
	t0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	var st perfv1.PerfExperimentStatus
	at := func(m int) *metav1.Time { v := metav1.NewTime(t0.Add(time.Duration(m) * time.Minute)); return &v }
	st.Windows = append(st.Windows, perfv1.WindowStatus{Variant: perfv1.VariantRounds, Start: at(0)})
	for i, v := range []perfv1.Variant{perfv1.VariantBaseline, perfv1.VariantTreatment, perfv1.VariantTreatment, perfv1.VariantBaseline} {
		r := int32(i / 2)
		st.Windows = append(st.Windows, perfv1.WindowStatus{Variant: v, Round: &r, Start: at(2*i + 1), End: at(2*i + 2)})
	}
	minutes := func(t time.Time) float64 { return t.Sub(t0).Minutes() }
	var got []string
	for _, m := range runMarkers(st, minutes) {
		got = append(got, fmt.Sprintf("%s@%g", m.label, m.at))
	}
	if want := "toggle applied@2 toggle reverted@6"; strings.Join(got, " ") != want {
		t.Errorf("markers %q; want %q", got, want)
	}
	r := int32(1)
	if l := windowLabel(perfv1.WindowStatus{Stage: 0, Variant: perfv1.VariantTreatment, Round: &r}); l != "s1 r2 B" {
		t.Errorf("label %q", l)
	}
}

// TestExportInterleavedRoundTripsThroughAnalyze: an interleaved run's
// sub-windows export as baseline:rN / treatment:rN, and analyze compares them
// round by round, to the operator's numbers; an invalid round is left out.
func TestExportInterleavedRoundTripsThroughAnalyze(t *testing.T) {
	exp := plannedExperiment(perfv1.DesignInterleaved)
	exp.Status.Windows = nil
	var rounds []analysis.RoundPair
	yes, no := true, false
	for r := int32(0); r < 4; r++ {
		var pair analysis.RoundPair
		for k, v := range []perfv1.Variant{perfv1.VariantBaseline, perfv1.VariantTreatment} {
			var vals perfv1.SeriesValues
			for i := range 6 {
				cpu := int64(400 + 7*((int(r)*13+i*5+k*3)%9))
				if k == 1 {
					cpu = cpu * 116 / 100
				}
				vals.CPUMillicores = append(vals.CPUMillicores, cpu)
				vals.MemoryBytes = append(vals.MemoryBytes, 1<<30+int64(i+int(r))<<20)
			}
			ser := &perfv1.WindowSeries{StepSeconds: 10}
			ser.SetValues(vals)
			round := r
			valid := &yes
			if r == 3 && k == 1 {
				valid = &no
			}
			exp.Status.Windows = append(exp.Status.Windows, perfv1.WindowStatus{Stage: 0, Variant: v, Round: &round, Series: ser, Valid: valid})
			if r < 3 {
				s := make(analysis.Series, len(vals.CPUMillicores))
				for i, c := range vals.CPUMillicores {
					s[i] = float64(c) / 1000
				}
				if k == 0 {
					pair.Baseline = s
				} else {
					pair.Treatment = s
				}
			}
		}
		if r < 3 {
			rounds = append(rounds, pair)
		}
	}
	got, path := exportAndAnalyze(t, exp)
	want, err := analysis.CompareRounds(rounds, analysis.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Stages) != 1 || math.Abs(got.Stages[0].Metrics["cpu"].Overhead-want.Overhead) > 1e-9 ||
		math.Abs(got.Stages[0].Metrics["cpu"].CIHigh-want.CIHigh) > 1e-9 {
		t.Errorf("analyze %+v; the operator's %+v", got.Stages, want)
	}
	raw, _ := os.ReadFile(path)
	if !strings.Contains(string(raw), "treatment:r3") || strings.Contains(string(raw), ":r4") {
		t.Errorf("export:\n%s", raw)
	}
}

// A run with variants exports one treatment@NAME per variant and the
// baseline measured after it (baseline@NAME), and analyze compares each
// variant with the two baselines around it at the operator's corrected
// confidence: its numbers are the operator's.
func TestExportVariantsRoundTripsThroughAnalyze(t *testing.T) {
	exp := &perfv1.PerfExperiment{}
	exp.Spec.Stages = []perfv1.StageSpec{{QPS: 50}}
	exp.Spec.Variants = []perfv1.ArmSpec{{Name: "g1"}, {Name: "serial"}, {Name: "parallel"}}
	series := func(level float64, seed int) (analysis.Series, *perfv1.WindowSeries) {
		var vals perfv1.SeriesValues
		var s analysis.Series
		for i := range 24 {
			c := int64(level*1000) + int64((i*7+seed*13)%11) - 5
			vals.CPUMillicores = append(vals.CPUMillicores, c)
			vals.MemoryBytes = append(vals.MemoryBytes, int64(level*1e9)+int64((i*5+seed)%7)<<20)
			s = append(s, float64(c)/1000)
		}
		ser := &perfv1.WindowSeries{StepSeconds: 10}
		ser.SetValues(vals)
		return s, ser
	}
	yes := true
	base, ser := series(0.40, 0)
	exp.Status.Windows = append(exp.Status.Windows, perfv1.WindowStatus{Stage: 0, Variant: perfv1.VariantBaseline, Series: ser, Valid: &yes})
	treat, after := map[string]analysis.Series{}, map[string]analysis.Series{}
	for i, v := range []string{"g1", "serial", "parallel"} {
		exp.Status.Windows = append(exp.Status.Windows, perfv1.WindowStatus{Stage: 0, Variant: perfv1.VariantSettle, Arm: v})
		s, ser := series(0.40+0.02*float64(i), i+1)
		treat[v] = s
		exp.Status.Windows = append(exp.Status.Windows, perfv1.WindowStatus{Stage: 0, Variant: perfv1.VariantTreatment, Arm: v, Series: ser, Valid: &yes})
		// The baseline after the variant, drifting up a little each time.
		b, bser := series(0.401+0.001*float64(i), 10+i)
		after[v] = b
		exp.Status.Windows = append(exp.Status.Windows, perfv1.WindowStatus{Stage: 0, Variant: perfv1.VariantBaseline, Arm: v, Series: bser, Valid: &yes})
	}
	got, path := exportAndAnalyze(t, exp)
	if len(got.Stages) != 3 {
		t.Fatalf("rows %+v", got.Stages)
	}
	o := analysis.DefaultOptions()
	o.Confidence = 1 - 0.05/3
	before := base
	for i, v := range []string{"g1", "serial", "parallel"} {
		row := got.Stages[i]
		// The operator's bracket: the baseline before the variant and the
		// one after it.
		pooled := append(append(analysis.Series{}, before...), after[v]...)
		before = after[v]
		want, err := analysis.Compare(pooled, treat[v], o)
		if err != nil {
			t.Fatal(err)
		}
		if row.Variant != v || row.Confidence != o.Confidence || math.Abs(row.Metrics["cpu"].Overhead-want.Overhead) > 1e-9 ||
			math.Abs(row.Metrics["cpu"].CILow-want.CILow) > 1e-9 || math.Abs(row.Metrics["cpu"].CIHigh-want.CIHigh) > 1e-9 {
			t.Errorf("row %d: %+v; the operator's %s: %+v", i, row, v, want)
		}
	}
	var table strings.Builder
	if err := printAnalysis(&table, got); err != nil || !strings.Contains(table.String(), "98.3% CI") || !strings.Contains(table.String(), "50 serial") {
		t.Errorf("table: %v\n%s", err, table.String())
	}
	raw, _ := os.ReadFile(path)
	if !strings.Contains(string(raw), "treatment@parallel") || !strings.Contains(string(raw), "baseline@serial") {
		t.Errorf("export:\n%s", raw)
	}
}

// exportAndAnalyze writes exp's samples as export does and reads them back as
// analyze does; it returns the analysis and the samples file.
func exportAndAnalyze(t *testing.T, exp *perfv1.PerfExperiment) (analyzeJSON, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "samples.csv")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := csv.NewWriter(f)
	if _, err := exportSamples(w, exp); err != nil {
		t.Fatal(err)
	}
	w.Flush()
	if err := w.Error(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := analyzeFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return got, path
}
