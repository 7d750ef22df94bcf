package analysis

import (
	"fmt"
	"strconv"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
)

// StageInput is everything measured in one stage's baseline and treatment
// windows. Index 0 of each pair is the baseline, 1 the treatment.
type StageInput struct {
	// Name is the stage's name; "" uses its QPS.
	Name string
	// QPS is the stage's target rate.
	QPS int32
	// CPU (cores), Memory (working-set bytes), Heap (bytes) and GC (seconds of
	// GC per second) samples. Heap and GC may be empty when the target does
	// not export them.
	CPU, Memory, Heap, GC [2]Series
	// CPULimitCores and MemoryLimitBytes are the target's total limits, for
	// the deltas in percentage points of the limit; 0 leaves those out.
	CPULimitCores, MemoryLimitBytes float64
	// P50, P95 and P99 are the windows' exact latency percentiles in ms; 0 is
	// unknown.
	P50, P95, P99 [2]float64
	// Trustworthy is false when a window of the stage was invalid.
	Trustworthy bool
	// Rounds, when set, are an interleaved stage's valid rounds; CPU, Memory
	// and Heap are then compared round by round (CompareRounds) and the
	// pairs above are unused.
	Rounds []RoundInput
}

// RoundInput is one round of an interleaved stage: its sub-windows' samples,
// index 0 the baseline, 1 the treatment. Heap and GC may be empty.
type RoundInput struct {
	CPU, Memory, Heap, GC [2]Series
	// P50, P95 and P99 are the sub-windows' latency percentiles in ms, from
	// the histograms of their own requests; 0 is unknown.
	P50, P95, P99 [2]float64
}

// tolerances are the parsed success criteria; nil means not set.
type tolerances struct{ cpu, memory, p99 *float64 }

func (t tolerances) any() bool { return t.cpu != nil || t.memory != nil || t.p99 != nil }

func parseCriteria(crit *perfv1.SuccessCriteria) (tolerances, error) {
	var t tolerances
	if crit == nil {
		return t, nil
	}
	for _, f := range []struct {
		name string
		p    perfv1.Percent
		dst  **float64
	}{
		{"maxCPUOverhead", crit.MaxCPUOverhead, &t.cpu},
		{"maxMemoryOverhead", crit.MaxMemoryOverhead, &t.memory},
		{"maxP99Overhead", crit.MaxP99Overhead, &t.p99},
	} {
		if f.p == "" {
			continue
		}
		v, err := f.p.Fraction()
		if err != nil {
			return t, fmt.Errorf("successCriteria.%s %q: %w", f.name, f.p, err)
		}
		*f.dst = &v
	}
	return t, nil
}

// SummarizeStage builds one row of the overhead table and the stage's verdict.
//
// CPU and memory are required from a trustworthy stage (an error says which is
// missing or degenerate); an untrustworthy stage omits what cannot be compared,
// since its verdict is Inconclusive anyway. Heap and GC time are
// informational (GC time does not decide the verdict): omitted when either
// window lacks them or they cannot be compared (no GC at all in a window). Latencies are compared when
// both windows know them. Material: the point estimate of the overhead is
// strictly above the matching criterion (see the package documentation).
func SummarizeStage(in StageInput, crit *perfv1.SuccessCriteria, o Options) (perfv1.StageSummary, error) {
	tol, err := parseCriteria(crit)
	if err != nil {
		return perfv1.StageSummary{}, err
	}
	s := perfv1.StageSummary{Stage: in.Name, QPS: in.QPS, Trustworthy: in.Trustworthy}
	if s.Stage == "" {
		s.Stage = strconv.Itoa(int(in.QPS))
	}
	row := func(name string, pick func(RoundInput) [2]Series, pair [2]Series, limit float64, required bool) (*perfv1.MetricComparison, error) {
		if len(in.Rounds) == 0 {
			return resourceRow(name, pair, limit, required, o)
		}
		rounds := make([]RoundPair, 0, len(in.Rounds))
		for _, r := range in.Rounds {
			p := pick(r)
			if !required && (len(p[0]) == 0 || len(p[1]) == 0) {
				return nil, nil // heap: every round must have it
			}
			rounds = append(rounds, RoundPair{Baseline: p[0], Treatment: p[1]})
		}
		return roundsRow(name, rounds, limit, required, o)
	}
	if s.CPU, err = row("cpu", func(r RoundInput) [2]Series { return r.CPU }, in.CPU, in.CPULimitCores, in.Trustworthy); err != nil {
		return perfv1.StageSummary{}, err
	}
	if s.Memory, err = row("memory", func(r RoundInput) [2]Series { return r.Memory }, in.Memory, in.MemoryLimitBytes, in.Trustworthy); err != nil {
		return perfv1.StageSummary{}, err
	}
	s.Heap, _ = row("heap", func(r RoundInput) [2]Series { return r.Heap }, in.Heap, 0, false)
	s.GC, _ = row("gc", func(r RoundInput) [2]Series { return r.GC }, in.GC, 0, false)
	s.P50, s.P95, s.P99 = latencyRow(in.P50), latencyRow(in.P95), latencyRow(in.P99)
	if len(in.Rounds) > 0 {
		s.P50 = roundsLatencyRow(in.Rounds, func(r RoundInput) [2]float64 { return r.P50 }, o)
		s.P95 = roundsLatencyRow(in.Rounds, func(r RoundInput) [2]float64 { return r.P95 }, o)
		s.P99 = roundsLatencyRow(in.Rounds, func(r RoundInput) [2]float64 { return r.P99 }, o)
	}
	setMaterial(s.CPU, tol.cpu)
	setMaterial(s.Memory, tol.memory)
	setMaterial(s.P99, tol.p99)
	s.Verdict = stageVerdict(&s, tol)
	return s, nil
}

// resourceRow compares one sampled metric; required makes a missing or
// degenerate comparison an error instead of an omission.
func resourceRow(name string, pair [2]Series, limit float64, required bool, o Options) (*perfv1.MetricComparison, error) {
	if !required && (len(pair[0]) == 0 || len(pair[1]) == 0) {
		return nil, nil
	}
	r, err := Compare(pair[0], pair[1], o)
	return resultRow(name, r, err, limit, required)
}

// roundsRow compares one sampled metric of an interleaved stage round by round.
func roundsRow(name string, rounds []RoundPair, limit float64, required bool, o Options) (*perfv1.MetricComparison, error) {
	r, err := CompareRounds(rounds, o)
	return resultRow(name, r, err, limit, required)
}

func resultRow(name string, r Result, err error, limit float64, required bool) (*perfv1.MetricComparison, error) {
	if err != nil {
		if !required {
			return nil, nil
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	c := comparison(r)
	if limit > 0 {
		pp := r.Delta / limit * 100
		c.DeltaPercentOfLimit = &pp
	}
	return c, nil
}

// roundsLatencyRow compares a latency percentile of an interleaved stage
// round by round: an interval, unlike two sequential windows' single values.
func roundsLatencyRow(rounds []RoundInput, pick func(RoundInput) [2]float64, o Options) *perfv1.MetricComparison {
	vals := make([][2]float64, len(rounds))
	for i, r := range rounds {
		vals[i] = pick(r)
	}
	r, err := CompareRoundValues(vals, o)
	if err != nil {
		return nil
	}
	return comparison(r)
}

func latencyRow(p [2]float64) *perfv1.MetricComparison {
	if !(p[0] > 0 && p[1] > 0) {
		return nil
	}
	return comparison(CompareLatency(p[0], p[1]))
}

func comparison(r Result) *perfv1.MetricComparison {
	c := &perfv1.MetricComparison{
		Baseline: r.Baseline, Treatment: r.Treatment, Delta: r.Delta,
		Overhead: r.Overhead, CILow: r.CILow, CIHigh: r.CIHigh, Significant: r.Significant,
		Rounds: int32(r.Rounds),
	}
	if r.MDE > 0 {
		m := r.MDE
		c.MDE = &m
	}
	return c
}

func setMaterial(c *perfv1.MetricComparison, tol *float64) {
	if c != nil {
		c.Material = isMaterial(c, tol)
	}
}

func isMaterial(c *perfv1.MetricComparison, tol *float64) bool {
	return c != nil && tol != nil && c.Overhead > *tol
}

// stageVerdict decides a stage from its comparisons, recomputing materiality
// from the overheads so that it depends only on the data and the criteria.
func stageVerdict(s *perfv1.StageSummary, tol tolerances) perfv1.Verdict {
	switch {
	case !s.Trustworthy:
		return perfv1.VerdictInconclusive
	case isMaterial(s.CPU, tol.cpu) || isMaterial(s.Memory, tol.memory) || isMaterial(s.P99, tol.p99):
		return perfv1.VerdictFail
	case tol.any():
		return perfv1.VerdictPass
	}
	// Only the resource rows decide: an interleaved stage gives latency rows
	// intervals too, and three more chances at a 5 % false positive would make
	// one A/A run in four "measure an effect". Latency is held by
	// maxP99Overhead when it matters.
	for _, c := range []*perfv1.MetricComparison{s.CPU, s.Memory, s.Heap} {
		if c != nil && c.Significant {
			// No criteria to hold, but an effect was measured: "Pass" with the
			// effect in the table, as VerdictPass documents.
			return perfv1.VerdictPass
		}
	}
	return perfv1.VerdictNoEffect
}

// Verdict is the experiment's outcome over its stages: Inconclusive when it was
// aborted, has no stages or any stage is Inconclusive; otherwise Fail when any
// stage fails, NoEffect when every stage is NoEffect, and Pass (including a mix
// of Pass and NoEffect). Each stage is re-decided from its comparisons and crit,
// so the result never depends on a stale stored stage verdict. Criteria that do
// not parse (admission refuses them) give Inconclusive rather than a silently
// ignored gate.
func Verdict(stages []perfv1.StageSummary, crit *perfv1.SuccessCriteria, aborted bool) perfv1.Verdict {
	tol, err := parseCriteria(crit)
	if aborted || err != nil || len(stages) == 0 {
		return perfv1.VerdictInconclusive
	}
	seen := map[perfv1.Verdict]int{}
	for i := range stages {
		seen[stageVerdict(&stages[i], tol)]++
	}
	switch {
	case seen[perfv1.VerdictInconclusive] > 0:
		return perfv1.VerdictInconclusive
	case seen[perfv1.VerdictFail] > 0:
		return perfv1.VerdictFail
	case seen[perfv1.VerdictNoEffect] == len(stages):
		return perfv1.VerdictNoEffect
	}
	return perfv1.VerdictPass
}

// Columns are the printer columns: per metric the largest (most positive)
// overhead over the stages that have it, formatted like "+4.1%" or "-0.3%";
// empty when no stage has the metric.
func Columns(stages []perfv1.StageSummary) perfv1.OverheadColumns {
	pick := func(get func(*perfv1.StageSummary) *perfv1.MetricComparison) string {
		var best *float64
		for i := range stages {
			if c := get(&stages[i]); c != nil && (best == nil || c.Overhead > *best) {
				best = &c.Overhead
			}
		}
		if best == nil {
			return ""
		}
		return formatPercent(*best)
	}
	return perfv1.OverheadColumns{
		CPU:    pick(func(s *perfv1.StageSummary) *perfv1.MetricComparison { return s.CPU }),
		Memory: pick(func(s *perfv1.StageSummary) *perfv1.MetricComparison { return s.Memory }),
		P99:    pick(func(s *perfv1.StageSummary) *perfv1.MetricComparison { return s.P99 }),
	}
}

// formatPercent writes a fraction as a signed percentage with one decimal; a
// value that rounds to zero is "+0.0%", never "-0.0%".
func formatPercent(f float64) string {
	s := fmt.Sprintf("%+.1f%%", f*100)
	if s == "-0.0%" {
		return "+0.0%"
	}
	return s
}
