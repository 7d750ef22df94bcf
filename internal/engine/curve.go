package engine

import (
	"fmt"
	"math"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
	"perfexp.dev/perf-operator/internal/analysis"
)

// wantsCurve reports whether a completed run writes status.curve and
// status.knee: a load-only sweep always, a toggle's run when it has several
// stages (sequential design: its baseline windows are the curve).
func wantsCurve(spec *perfv1.PerfExperimentSpec) bool {
	return !spec.HasToggle() || (len(spec.Stages) > 1 && !spec.Interleaved())
}

// curve builds the load curve from each stage's baseline window and finds its
// knee (spec.knee).
func (x *decider) curve() ([]perfv1.CurvePoint, *perfv1.KneeStatus) {
	points := make([]perfv1.CurvePoint, len(x.spec.Stages))
	loads := make([]analysis.LoadPoint, len(x.spec.Stages))
	var cpuLimit float64
	if m := x.st.Measurement; m != nil {
		cpuLimit = m.CPULimitCores * float64(max(m.Replicas, 1))
	}
	for i, st := range x.spec.Stages {
		name := x.spec.StageName(i)
		p := perfv1.CurvePoint{Stage: name, QPS: st.QPS, Concurrency: st.Concurrency}
		loads[i] = analysis.LoadPoint{Name: name, QPS: st.QPS, Concurrency: st.Concurrency}
		w := x.lastWindow(int32(i), perfv1.VariantBaseline, "")
		if w != nil && w.Load != nil {
			l := w.Load
			p.AchievedQPS, p.P50Ms, p.P95Ms, p.P99Ms = l.AchievedQPS, l.P50Ms, l.P95Ms, l.P99Ms
			if l.Requests > 0 {
				p.ErrorPercent = round3(float64(l.Failures) * 100 / float64(l.Requests))
			}
			p.Valid = w.Valid != nil && *w.Valid
			loads[i].Achieved, loads[i].P99, loads[i].Measured = l.AchievedQPS, l.P99Ms, true
		}
		if w != nil && w.Series != nil {
			if v, err := w.Series.Values(); err == nil {
				if c, ok := meanOf(v.CPUMillicores); ok {
					cores := round3(c / 1000)
					p.CPUCores = &cores
					if cpuLimit > 0 {
						pct := round3(cores / cpuLimit * 100)
						p.CPUPercentOfLimit = &pct
					}
				}
				if m, ok := meanOf(v.MemoryBytes); ok {
					b := int64(m)
					p.MemoryBytes = &b
				}
			}
		}
		points[i] = p
	}
	// Validated at admission; a value that is not there takes its default.
	shortfall, err := x.spec.Knee.RateShortfall.Fraction()
	if err != nil {
		shortfall, _ = perfv1.DefaultKneeShortfall.Fraction()
	}
	factor := x.spec.Knee.P99Factor
	if factor < 2 {
		factor = perfv1.DefaultKneeP99Factor
	}
	k, ok := analysis.FindKnee(loads, analysis.KneeRule{Shortfall: shortfall, P99Factor: float64(factor)})
	if !ok {
		return points, nil
	}
	return points, &perfv1.KneeStatus{Stage: x.spec.StageName(k.Index), Index: int32(k.Index), CapacityQPS: round3(k.CapacityQPS), Reason: k.Reason}
}

// sweepOutcome says how a load-only sweep ended, for its event and Complete
// condition.
func sweepOutcome(st *perfv1.PerfExperimentStatus) string {
	msg := fmt.Sprintf("load-only sweep: all %d stages measured", len(st.Curve))
	if k := st.Knee; k != nil {
		return msg + fmt.Sprintf("; knee at stage %s, capacity about %.1f req/s: %s", k.Stage, k.CapacityQPS, k.Reason)
	}
	best := 0.0
	for _, p := range st.Curve {
		best = max(best, p.AchievedQPS)
	}
	return msg + fmt.Sprintf("; no knee: every stage kept up (best %.1f req/s)", best)
}

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }

func meanOf(v []int64) (float64, bool) {
	if len(v) == 0 {
		return 0, false
	}
	var sum float64
	for _, x := range v {
		sum += float64(x)
	}
	return sum / float64(len(v)), true
}
