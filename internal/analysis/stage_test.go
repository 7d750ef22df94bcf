package analysis

import (
	"strings"
	"testing"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
)

// stage builds a trustworthy input with white-noise windows: CPU and memory
// scaled by the given effects, p99 by p99Effect.
func stage(cpuEffect, memEffect, p99Effect float64) StageInput {
	return StageInput{
		Name: "", QPS: 500, Trustworthy: true,
		CPU:           [2]Series{ar1(1, 120, 0.8, 0.01, 0), ar1(2, 120, 0.8*(1+cpuEffect), 0.01, 0)},
		Memory:        [2]Series{ar1(3, 120, 2.1e9, 0.005, 0), ar1(4, 120, 2.1e9*(1+memEffect), 0.005, 0)},
		CPULimitCores: 4, MemoryLimitBytes: 8e9,
		P50: [2]float64{5, 5}, P95: [2]float64{9, 9}, P99: [2]float64{12, 12 * (1 + p99Effect)},
	}
}

func crit(cpu, mem, p99 perfv1.Percent) *perfv1.SuccessCriteria {
	return &perfv1.SuccessCriteria{MaxCPUOverhead: cpu, MaxMemoryOverhead: mem, MaxP99Overhead: p99}
}

func TestSummarizeStage(t *testing.T) {
	noHeap := stage(0.041, 0.022, 0.01)
	withHeap := noHeap
	withHeap.Heap = [2]Series{ar1(5, 120, 1e9, 0.02, 0), ar1(6, 120, 1e9, 0.02, 0)}
	oneHeap := noHeap
	oneHeap.Heap = [2]Series{ar1(5, 120, 1e9, 0.02, 0), nil}
	untrusted := stage(0.041, 0, 0)
	untrusted.Trustworthy = false
	untrustedEmpty := untrusted
	untrustedEmpty.CPU, untrustedEmpty.Memory = [2]Series{}, [2]Series{}
	for _, tc := range []struct {
		name     string
		in       StageInput
		crit     *perfv1.SuccessCriteria
		verdict  perfv1.Verdict
		material []string // metrics that must be material
		check    func(*testing.T, perfv1.StageSummary)
	}{
		{name: "within every criterion", in: noHeap, crit: crit("5%", "5%", "10%"), verdict: perfv1.VerdictPass},
		{name: "cpu over its criterion", in: noHeap, crit: crit("3%", "5%", ""), verdict: perfv1.VerdictFail, material: []string{"cpu"}},
		{name: "memory over", in: noHeap, crit: crit("", "2%", ""), verdict: perfv1.VerdictFail, material: []string{"memory"}},
		{name: "p99 over, without an interval", in: stage(0, 0, 0.2), crit: crit("", "", "10%"), verdict: perfv1.VerdictFail, material: []string{"p99"}},
		{name: "zero tolerance", in: noHeap, crit: crit("0%", "", ""), verdict: perfv1.VerdictFail, material: []string{"cpu"}},
		{name: "no criteria, no effect", in: stage(0, 0, 0), verdict: perfv1.VerdictNoEffect},
		{name: "no criteria, an effect", in: noHeap, verdict: perfv1.VerdictPass},
		{name: "untrustworthy", in: untrusted, crit: crit("1%", "", ""), verdict: perfv1.VerdictInconclusive, material: []string{"cpu"}},
		{name: "untrustworthy without samples", in: untrustedEmpty, verdict: perfv1.VerdictInconclusive,
			check: func(t *testing.T, s perfv1.StageSummary) {
				if s.CPU != nil || s.Memory != nil || s.P99 == nil {
					t.Errorf("want only latency rows: %+v", s)
				}
			}},
		{name: "units and names", in: withHeap, verdict: perfv1.VerdictPass, check: func(t *testing.T, s perfv1.StageSummary) {
			if s.Stage != "500" || s.QPS != 500 || s.Heap == nil || s.P50 == nil || s.P95 == nil {
				t.Errorf("rows: %+v", s)
			}
			// Delta in percentage points of the limit: 0.8·0.041 cores of 4.
			if p := s.CPU.DeltaPercentOfLimit; p == nil || *p < 0.7 || *p > 0.95 {
				t.Errorf("cpu delta %% of limit %v", p)
			}
			if s.Heap.DeltaPercentOfLimit != nil || s.P99.DeltaPercentOfLimit != nil {
				t.Errorf("only cpu and memory have a limit")
			}
			if !s.CPU.Significant || s.P99.Significant {
				t.Errorf("cpu significant %v, p99 %v", s.CPU.Significant, s.P99.Significant)
			}
		}},
		{name: "one-sided heap is omitted", in: oneHeap, verdict: perfv1.VerdictPass, check: func(t *testing.T, s perfv1.StageSummary) {
			if s.Heap != nil {
				t.Errorf("heap %+v", s.Heap)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := SummarizeStage(tc.in, tc.crit, fastOptions())
			if err != nil {
				t.Fatal(err)
			}
			if s.Verdict != tc.verdict {
				t.Errorf("verdict %s, want %s", s.Verdict, tc.verdict)
			}
			got := map[string]bool{}
			for name, c := range map[string]*perfv1.MetricComparison{"cpu": s.CPU, "memory": s.Memory, "heap": s.Heap, "p99": s.P99} {
				if c != nil && c.Material {
					got[name] = true
				}
			}
			if len(got) != len(tc.material) {
				t.Errorf("material %v, want %v", got, tc.material)
			}
			for _, m := range tc.material {
				if !got[m] {
					t.Errorf("%s not material", m)
				}
			}
			if tc.check != nil {
				tc.check(t, s)
			}
		})
	}
}

func TestSummarizeStageErrors(t *testing.T) {
	noCPU := stage(0, 0, 0)
	noCPU.CPU[1] = nil
	zeroMem := stage(0, 0, 0)
	zeroMem.Memory[0] = Series{0, 0, 0, 0, 0}
	for _, tc := range []struct {
		name string
		in   StageInput
		crit *perfv1.SuccessCriteria
		want string
	}{
		{"trustworthy stage without cpu", noCPU, nil, "cpu: treatment: too few samples"},
		{"zero memory", zeroMem, nil, "memory: baseline mean is 0"},
		{"bad criterion", stage(0, 0, 0), crit("5", "", ""), `successCriteria.maxCPUOverhead "5"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := SummarizeStage(tc.in, tc.crit, fastOptions())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want %q", err, tc.want)
			}
		})
	}
}

func row(v perfv1.Verdict, cpu float64) perfv1.StageSummary {
	s := perfv1.StageSummary{Trustworthy: v != perfv1.VerdictInconclusive, Verdict: v,
		CPU: &perfv1.MetricComparison{Overhead: cpu, CILow: cpu - 0.01, CIHigh: cpu + 0.01}}
	s.CPU.Significant = s.CPU.CILow > 0 || s.CPU.CIHigh < 0
	return s
}

func TestVerdict(t *testing.T) {
	pass, fail := row(perfv1.VerdictPass, 0.02), row(perfv1.VerdictFail, 0.08)
	none, inc := row(perfv1.VerdictNoEffect, 0), row(perfv1.VerdictInconclusive, 0.02)
	c := crit("5%", "", "")
	latencyOnly := none
	latencyOnly.P95 = &perfv1.MetricComparison{Overhead: 0.1, CILow: 0.02, CIHigh: 0.2, Significant: true}
	for _, tc := range []struct {
		name    string
		stages  []perfv1.StageSummary
		crit    *perfv1.SuccessCriteria
		aborted bool
		want    perfv1.Verdict
	}{
		{"all pass", []perfv1.StageSummary{pass, pass}, c, false, perfv1.VerdictPass},
		{"one fails", []perfv1.StageSummary{pass, fail}, c, false, perfv1.VerdictFail},
		{"inconclusive beats fail", []perfv1.StageSummary{fail, inc}, c, false, perfv1.VerdictInconclusive},
		{"aborted", []perfv1.StageSummary{pass}, c, true, perfv1.VerdictInconclusive},
		{"no stages", nil, c, false, perfv1.VerdictInconclusive},
		{"all no effect", []perfv1.StageSummary{none, none}, nil, false, perfv1.VerdictNoEffect},
		{"mixed pass and no effect", []perfv1.StageSummary{none, pass}, nil, false, perfv1.VerdictPass},
		{"a significant latency row alone measures no effect", []perfv1.StageSummary{latencyOnly}, nil, false, perfv1.VerdictNoEffect},
		{"criteria re-decide stale stage verdicts", []perfv1.StageSummary{pass}, crit("1%", "", ""), false, perfv1.VerdictFail},
		{"no effect with criteria is a pass", []perfv1.StageSummary{none}, c, false, perfv1.VerdictPass},
		{"unparsable criteria", []perfv1.StageSummary{pass}, crit("x", "", ""), false, perfv1.VerdictInconclusive},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Verdict(tc.stages, tc.crit, tc.aborted); got != tc.want {
				t.Errorf("Verdict = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestColumns(t *testing.T) {
	mc := func(o float64) *perfv1.MetricComparison { return &perfv1.MetricComparison{Overhead: o} }
	for _, tc := range []struct {
		name   string
		stages []perfv1.StageSummary
		want   perfv1.OverheadColumns
	}{
		{"none", nil, perfv1.OverheadColumns{}},
		{"largest per metric", []perfv1.StageSummary{
			{CPU: mc(0.012), Memory: mc(-0.003), P99: mc(0.001)},
			{CPU: mc(0.041), Memory: mc(-0.010), P99: nil},
			{CPU: mc(0.020), Memory: nil, P99: mc(-0.2)},
		}, perfv1.OverheadColumns{CPU: "+4.1%", Memory: "-0.3%", P99: "+0.1%"}},
		{"negative zero", []perfv1.StageSummary{{CPU: mc(-0.0004)}}, perfv1.OverheadColumns{CPU: "+0.0%"}},
		{"rounding", []perfv1.StageSummary{{Memory: mc(0.02249), P99: mc(1.5)}}, perfv1.OverheadColumns{Memory: "+2.2%", P99: "+150.0%"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Columns(tc.stages); got != tc.want {
				t.Errorf("Columns = %+v, want %+v", got, tc.want)
			}
		})
	}
}
