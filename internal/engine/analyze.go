package engine

import (
	"fmt"
	"strings"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
	"perfexp.dev/perf-operator/internal/analysis"
)

// analyzing ends a completed run: the overhead table per stage, the verdict and
// the printer columns, then Succeeded. A stage whose series cannot be compared
// (no samples at all) still gets its latency rows and is marked untrustworthy.
func (x *decider) analyzing() {
	if wantsCurve(x.spec) {
		x.st.Curve, x.st.Knee = x.curve()
	}
	if !x.spec.HasToggle() {
		x.finish(perfv1.PhaseSucceeded, perfv1.ReasonSucceeded, Outcome(x.spec, x.st)+"; nothing on Deployment "+x.spec.Target.Deployment+" was changed")
		return
	}
	opts := analysis.DefaultOptions()
	arms := x.spec.Arms()
	opts.Confidence = analysis.FamilyConfidence(len(arms))
	var summary []perfv1.StageSummary
	for s := range x.spec.Stages {
		for _, arm := range arms {
			summary = append(summary, x.summarizeStage(int32(s), arm, opts))
		}
	}
	x.st.Summary = summary
	x.st.Verdict = analysis.Verdict(summary, x.spec.SuccessCriteria, false)
	cols := analysis.Columns(summary)
	x.st.Overhead = &cols
	x.finish(perfv1.PhaseSucceeded, perfv1.ReasonSucceeded, fmt.Sprintf("%s; Deployment %s restored", Outcome(x.spec, x.st), x.spec.Target.Deployment))
}

// summarizeStage is one row of the overhead table: a stage's treatment
// windows of arm against its baseline. A stage whose series cannot be
// compared (no samples at all) still gets its latency rows and is marked
// untrustworthy.
func (x *decider) summarizeStage(s int32, arm perfv1.Arm, opts analysis.Options) perfv1.StageSummary {
	in := x.stageInput(s, arm.Name)
	label := in.Name
	if arm.Name != "" {
		label += " " + arm.Name
	}
	row, err := analysis.SummarizeStage(in, x.spec.SuccessCriteria, opts)
	if err != nil {
		in.Trustworthy = false
		in.CPU, in.Memory, in.Heap, in.GC = [2]analysis.Series{}, [2]analysis.Series{}, [2]analysis.Series{}, [2]analysis.Series{}
		in.Rounds = nil
		// The event says why the full analysis failed, not how the
		// fallback without resource series fared.
		var again error
		if row, again = analysis.SummarizeStage(in, x.spec.SuccessCriteria, opts); again != nil {
			row = perfv1.StageSummary{Stage: in.Name, QPS: in.QPS, Verdict: perfv1.VerdictInconclusive}
		}
		x.event(true, perfv1.ReasonAnalysisIncomplete, "stage %s: %v", label, err)
	}
	row.Concurrency = x.spec.Stages[s].Concurrency
	row.Variant = arm.Name
	if opts.Confidence != analysis.DefaultConfidence {
		row.Confidence = opts.Confidence
	}
	return row
}

// Outcome says how a completed run ended, for its event and its Complete
// condition: the verdict and, when nothing was found or the run calibrated
// (A/A), the noise floor and how many comparisons noise alone made look
// significant.
func Outcome(spec *perfv1.PerfExperimentSpec, st *perfv1.PerfExperimentStatus) string {
	if !spec.HasToggle() && len(st.Summary) == 0 {
		return sweepOutcome(st)
	}
	msg := fmt.Sprintf("all %d stages measured, verdict %s", len(st.Summary), st.Verdict)
	if n := len(spec.Variants); n > 0 && len(st.Summary) == n*len(spec.Stages) {
		msg = fmt.Sprintf("all %d stages measured with %d variants, verdict %s (intervals at %.1f %% each, 95 %% together)",
			len(spec.Stages), n, st.Verdict, 100*analysis.FamilyConfidence(n))
	}
	if floor := noiseFloor(st.Summary); floor != "" && (st.Verdict == perfv1.VerdictNoEffect || spec.Calibrate) {
		msg += "; no effect larger than " + floor + " could be seen"
	}
	if spec.Calibrate {
		flagged, total := significantRows(st.Summary)
		msg = fmt.Sprintf("calibration (A/A, the toggle was never switched): %s; %d of %d comparisons looked significant from noise alone (about 1 in 20 is expected)", msg, flagged, total)
	}
	return msg
}

// noiseFloor states, per resource metric, the largest minimum detectable
// effect over the stages, such as "CPU ±3.1 %, memory ±0.8 %"; "" when no
// stage has one.
func noiseFloor(stages []perfv1.StageSummary) string {
	var parts []string
	for _, m := range []struct {
		name string
		get  func(*perfv1.StageSummary) *perfv1.MetricComparison
	}{
		{"CPU", func(s *perfv1.StageSummary) *perfv1.MetricComparison { return s.CPU }},
		{"memory", func(s *perfv1.StageSummary) *perfv1.MetricComparison { return s.Memory }},
	} {
		worst := 0.0
		for i := range stages {
			if c := m.get(&stages[i]); c != nil && c.MDE != nil {
				worst = max(worst, *c.MDE)
			}
		}
		if worst > 0 {
			parts = append(parts, fmt.Sprintf("%s ±%.1f %%", m.name, worst*100))
		}
	}
	return strings.Join(parts, ", ")
}

// significantRows counts the resource comparisons that were significant.
func significantRows(stages []perfv1.StageSummary) (flagged, total int) {
	for i := range stages {
		for _, c := range []*perfv1.MetricComparison{stages[i].CPU, stages[i].Memory} {
			if c == nil {
				continue
			}
			total++
			if c.Significant {
				flagged++
			}
		}
	}
	return flagged, total
}

// stageInput gathers a stage's baseline and arm's treatment windows for the
// analysis.
func (x *decider) stageInput(stage int32, arm string) analysis.StageInput {
	in := analysis.StageInput{Name: x.spec.StageName(int(stage)), QPS: x.spec.Stages[stage].QPS, Trustworthy: true}
	if m := x.st.Measurement; m != nil {
		replicas := float64(max(m.Replicas, 1))
		in.CPULimitCores = m.CPULimitCores * replicas
		in.MemoryLimitBytes = float64(m.MemoryLimitBytes) * replicas
	}
	if x.spec.Interleaved() {
		x.roundsInput(&in, stage)
		return in
	}
	// One side of the comparison may be several windows, pooled: a
	// variant's baseline is the baseline before it and the one after it.
	sides := [2][]*perfv1.WindowStatus{
		x.baselinesOf(stage, arm),
		{x.lastWindow(stage, perfv1.VariantTreatment, arm)},
	}
	for i, ws := range sides {
		var requests [3]float64 // weights of the latency percentiles
		heapAll, gcAll := true, true
		for _, w := range ws {
			if w == nil || w.Valid == nil || !*w.Valid {
				in.Trustworthy = false
			}
			if w == nil {
				heapAll, gcAll = false, false
				continue
			}
			if l := w.Load; l != nil {
				n := float64(max(l.Requests, 1))
				for k, p := range []*[2]float64{&in.P50, &in.P95, &in.P99} {
					q := []float64{l.P50Ms, l.P95Ms, l.P99Ms}[k]
					p[i] = (p[i]*requests[k] + q*n) / (requests[k] + n)
					requests[k] += n
				}
			}
			ser := w.Series
			if ser == nil {
				heapAll, gcAll = false, false
				continue
			}
			v, err := ser.Values()
			if err != nil {
				in.Trustworthy = false // a series that does not unpack was edited
				heapAll, gcAll = false, false
				continue
			}
			in.CPU[i] = append(in.CPU[i], scaled(v.CPUMillicores, 1.0/1000)...)
			in.Memory[i] = append(in.Memory[i], scaled(v.MemoryBytes, 1)...)
			in.Heap[i] = append(in.Heap[i], scaled(v.HeapBytes, 1)...)
			in.GC[i] = append(in.GC[i], scaled(v.GCMicrosPerSecond, 1e-6)...)
			heapAll = heapAll && len(v.HeapBytes) > 0
			gcAll = gcAll && len(v.GCMicrosPerSecond) > 0
		}
		if !heapAll {
			in.Heap[i] = nil
		}
		if !gcAll {
			in.GC[i] = nil
		}
	}
	if len(in.Heap[0]) == 0 || len(in.Heap[1]) == 0 {
		in.Heap = [2]analysis.Series{}
	}
	if len(in.GC[0]) == 0 || len(in.GC[1]) == 0 {
		in.GC = [2]analysis.Series{}
	}
	return in
}

// roundsInput gathers an interleaved stage's rounds: a round counts when both
// its sub-windows are valid and their series unpack. The stage is trustworthy
// when at least 2 rounds, and at least half of them, count.
func (x *decider) roundsInput(in *analysis.StageInput, stage int32) {
	rounds := x.spec.RoundsPerStage()
	for r := range rounds {
		var ri analysis.RoundInput
		ok := true
		for i, v := range []perfv1.Variant{perfv1.VariantBaseline, perfv1.VariantTreatment} {
			w := x.subWindow(stage, r, v)
			if w == nil || w.Valid == nil || !*w.Valid || w.Series == nil {
				ok = false
				break
			}
			vals, err := w.Series.Values()
			if err != nil {
				ok = false
				break
			}
			if l := w.Load; l != nil {
				ri.P50[i], ri.P95[i], ri.P99[i] = l.P50Ms, l.P95Ms, l.P99Ms
			}
			ri.CPU[i] = scaled(vals.CPUMillicores, 1.0/1000)
			ri.Memory[i] = scaled(vals.MemoryBytes, 1)
			ri.Heap[i] = scaled(vals.HeapBytes, 1)
			ri.GC[i] = scaled(vals.GCMicrosPerSecond, 1e-6)
		}
		if ok {
			in.Rounds = append(in.Rounds, ri)
		}
	}
	n := int32(len(in.Rounds))
	in.Trustworthy = n >= 2 && 2*n >= rounds
}

// baselinesOf is what a treatment of arm is compared with: the stage's
// baseline for spec.toggle; for a variant, the baseline measured before it
// (the stage's first, or the one after the previous variant) and the one
// measured after it, pooled — the mean of two baselines around the treatment
// cancels a drift that is linear over the three windows.
func (x *decider) baselinesOf(stage int32, arm string) []*perfv1.WindowStatus {
	if arm == "" {
		return []*perfv1.WindowStatus{x.lastWindow(stage, perfv1.VariantBaseline, "")}
	}
	before := ""
	for i, v := range x.spec.Variants {
		if v.Name == arm {
			if i > 0 {
				before = x.spec.Variants[i-1].Name
			}
			break
		}
	}
	return []*perfv1.WindowStatus{x.lastWindow(stage, perfv1.VariantBaseline, before), x.lastWindow(stage, perfv1.VariantBaseline, arm)}
}

// lastWindow is the stage's last window of kind v and arm: a variant's
// treatment window, or the baseline measured after it ("" for the stage's
// first baseline and spec.toggle's treatment).
func (x *decider) lastWindow(stage int32, v perfv1.Variant, arm string) *perfv1.WindowStatus {
	for i := len(x.st.Windows) - 1; i >= 0; i-- {
		if w := &x.st.Windows[i]; w.Stage == stage && w.Variant == v && w.Arm == arm {
			return w
		}
	}
	return nil
}

func scaled(v []int64, f float64) analysis.Series {
	out := make(analysis.Series, len(v))
	for i, x := range v {
		out[i] = float64(x) * f
	}
	return out
}
