//go:build e2e

package e2e

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
)

// oneStage keeps the interleaved example as it is (3 rounds of 20 s
// sub-windows after 10 s settles, 5 s samples) but runs one stage at qps after a
// brief warm-up, so the suite pays for one stage.
func oneStage(qps int32, calibrate bool) func(*perfv1.PerfExperiment) {
	return func(e *perfv1.PerfExperiment) {
		e.Spec.Warmup = &perfv1.WarmupSpec{QPS: 25, Duration: "20s"}
		e.Spec.Stages = []perfv1.StageSpec{{QPS: qps}}
		e.Spec.Calibrate = calibrate
		if calibrate {
			e.Name, e.Spec.SuccessCriteria = "profiling-aa", nil
		}
	}
}

// sequentialStageTime is a stage of the sequential local example as planned:
// baseline, settle, treatment, settle.
func sequentialStageTime(t *testing.T) time.Duration {
	seq := experiment(t, "profiling-overhead.yaml", "x", nil)
	var sum time.Duration
	for _, d := range []perfv1.Duration{seq.Spec.Windows.Baseline, seq.Spec.Windows.Settle, seq.Spec.Windows.Treatment, seq.Spec.Windows.Settle} {
		v, err := d.Parse()
		if err != nil {
			t.Fatal(err)
		}
		sum += v
	}
	return sum
}

// toyCounters are the toy pods' own record of the profiling switch, summed
// over the pods: process CPU seconds and work requests with it on and off.
type toyCounters struct{ cpuOn, cpuOff, reqOn, reqOff float64 }

func groundTruth(t *testing.T, ns string) toyCounters {
	t.Helper()
	var g toyCounters
	for _, p := range podsOf(t, ns, toy) {
		m := toyMetrics(t, p)
		g.cpuOn += m[`toy_profiling_process_cpu_seconds_total{profiling="on"}`]
		g.cpuOff += m[`toy_profiling_process_cpu_seconds_total{profiling="off"}`]
		g.reqOn += m[`toy_profiling_requests_total{profiling="on"}`]
		g.reqOff += m[`toy_profiling_requests_total{profiling="off"}`]
	}
	return g
}

// overhead is the app's ground truth between two readings: its CPU per
// request with profiling on over the same with it off, minus one.
func (g toyCounters) overhead(before toyCounters) (float64, error) {
	on, off := g.cpuOn-before.cpuOn, g.cpuOff-before.cpuOff
	rOn, rOff := g.reqOn-before.reqOn, g.reqOff-before.reqOff
	if on <= 0 || off <= 0 || rOn <= 0 || rOff <= 0 {
		return 0, fmt.Errorf("the app's counters moved by %g s over %g requests on, %g s over %g off", on, rOn, off, rOff)
	}
	return (on/rOn)/(off/rOff) - 1, nil
}

// roundsLine prints each round's sub-window CPU means, for the log.
func roundsLine(e *perfv1.PerfExperiment) string {
	var parts []string
	for _, w := range e.Status.Windows {
		if w.Round == nil || w.Series == nil {
			continue
		}
		v, err := w.Series.Values()
		if err != nil || len(v.CPUMillicores) == 0 {
			continue
		}
		sum := int64(0)
		for _, c := range v.CPUMillicores {
			sum += c
		}
		parts = append(parts, fmt.Sprintf("r%d %s %.1fm (%d pts)", *w.Round+1, w.Variant, float64(sum)/float64(len(v.CPUMillicores)), len(v.CPUMillicores)))
	}
	return strings.Join(parts, ", ")
}

// The profiling example with design interleaved: the operator's CPU overhead
// must come within 3 points of what the toy app itself says its switch burnt,
// with every round and sub-window recorded; alongside, an A/A run of the same
// design on another copy of the app must find no effect and state its noise
// floor.
func TestInterleavedProfilingMatchesTheAppsGroundTruth(t *testing.T) {
	const nsRun, nsAA = "e2e-interleaved", "e2e-aa"
	deploy(t, nsRun, toy)
	deploy(t, nsAA, toy)
	before := templateJSON(t, nsRun, toy)
	truth0 := groundTruth(t, nsRun)
	run := experiment(t, "profiling-overhead-interleaved.yaml", nsRun, oneStage(100, false))
	aa := experiment(t, "profiling-overhead-interleaved.yaml", nsAA, oneStage(50, true))
	// One after the other: on two cores, the A/A's arms would otherwise line
	// up with the other run's switches and measure their contention.
	if err := createExperiment(t, run); err != nil {
		t.Fatal(err)
	}
	doneRun := runUntil(t, client.ObjectKeyFromObject(run), 12*time.Minute, "the interleaved run to end", terminal)
	if err := createExperiment(t, aa); err != nil {
		t.Fatal(err)
	}
	doneAA := runUntil(t, client.ObjectKeyFromObject(aa), 12*time.Minute, "the A/A run to end", terminal)
	for _, d := range []*perfv1.PerfExperiment{doneRun, doneAA} {
		if d.Status.Phase != perfv1.PhaseSucceeded {
			t.Fatalf("%s: phase %s: %+v", d.Name, d.Status.Phase, d.Status.Abort)
		}
		if il := d.Status.Interleaving; il == nil || len(il.Rounds) != 3 {
			t.Fatalf("%s: status.interleaving %+v", d.Name, il)
		}
		subs := 0
		for _, w := range d.Status.Windows {
			if w.Round == nil {
				continue
			}
			subs++
			if w.Valid == nil || !*w.Valid {
				t.Errorf("%s: %s sub-window of round %d not valid: %v", d.Name, w.Variant, *w.Round+1, w.Invalid)
			}
		}
		if subs != 6 {
			t.Errorf("%s: %d sub-windows; want 6", d.Name, subs)
		}
	}
	truth, err := groundTruth(t, nsRun).overhead(truth0)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("interleaved rounds: %s", roundsLine(doneRun))
	row := doneRun.Status.Summary[0]
	cpu := row.CPU
	wall := doneRun.Status.CompletionTime.Sub(doneRun.Status.StartTime.Time)
	t.Logf("interleaved: CPU %+.1f%% [%+.1f, %+.1f] over %d rounds (MDE %.1f%%), the app's ground truth %+.1f%%; p99 %s; wall %s",
		100*cpu.Overhead, 100*cpu.CILow, 100*cpu.CIHigh, cpu.Rounds, 100*deref(cpu.MDE), 100*truth, describeRow(row.P99), wall.Round(time.Second))
	// The stage's time, load start to last sub-window, against a stage of the
	// sequential local example: at most half.
	var stageTime time.Duration
	for _, w := range doneRun.Status.Windows {
		if w.Variant == perfv1.VariantRounds && w.Start != nil && w.End != nil {
			stageTime = w.End.Sub(w.Start.Time)
		}
	}
	seq := sequentialStageTime(t)
	t.Logf("stage time %s; a stage of the sequential local example: %s (%.2f×)", stageTime.Round(time.Second), seq, stageTime.Seconds()/seq.Seconds())
	if stageTime == 0 || 2*stageTime > seq {
		t.Errorf("the interleaved stage took %s, more than half the sequential example's %s", stageTime, seq)
	}
	if math.Abs(cpu.Overhead-truth) > 0.03 {
		t.Errorf("CPU overhead %+.3f is more than 3 points from the app's ground truth %+.3f", cpu.Overhead, truth)
	}
	if cpu.Rounds != 3 || !cpu.Significant {
		t.Errorf("CPU comparison %+v: want 3 rounds and a significant overhead", cpu)
	}
	if row.P99 == nil || row.P99.Rounds != 3 {
		t.Errorf("p99 row %+v: want an interval over 3 rounds", row.P99)
	}
	t.Logf("A/A rounds: %s", roundsLine(doneAA))
	aaRow := doneAA.Status.Summary[0]
	t.Logf("A/A: verdict %s, CPU %s, memory %s; wall %s", doneAA.Status.Verdict, describeRow(aaRow.CPU), describeRow(aaRow.Memory),
		doneAA.Status.CompletionTime.Sub(doneAA.Status.StartTime.Time).Round(time.Second))
	// NoEffect with a noise floor. A 95 % interval calls pure noise
	// significant in 1 run of 20 by design (make bench-design measures the
	// rate): such a run may end Pass, but only with an effect far too small to
	// be anything (under 2 %); a larger one would be a broken design.
	if aaRow.CPU == nil || aaRow.CPU.MDE == nil || aaRow.Memory == nil || aaRow.Memory.MDE == nil {
		t.Errorf("A/A: CPU %+v, memory %+v: want both with a noise floor (MDE)", aaRow.CPU, aaRow.Memory)
	} else if doneAA.Status.Verdict != perfv1.VerdictNoEffect {
		for name, c := range map[string]*perfv1.MetricComparison{"CPU": aaRow.CPU, "memory": aaRow.Memory} {
			if c.Significant && math.Abs(c.Overhead) >= 0.02 {
				t.Errorf("A/A: verdict %s: %s %s from noise alone", doneAA.Status.Verdict, name, describeRow(c))
			}
		}
		t.Logf("A/A: verdict %s: noise alone looked significant (expected in 1 run of 20), within 2 %%", doneAA.Status.Verdict)
	}
	if c := meta.FindStatusCondition(doneAA.Status.Conditions, perfv1.ConditionComplete); c == nil ||
		!strings.Contains(c.Message, "calibration (A/A") || !strings.Contains(c.Message, "no effect larger than CPU ±") {
		t.Errorf("A/A: the Complete condition does not state the noise floor: %+v", c)
	} else {
		t.Logf("A/A: %s", c.Message)
	}
	assertTargetRestored(t, nsRun, toy, before)
	for _, ns := range []string{nsRun, nsAA} {
		for _, p := range podsOf(t, ns, toy) {
			if s := switchState(t, p, "profiling"); s != "off" {
				t.Errorf("pod %s/%s: profiling %s after the run", ns, p.Name, s)
			}
		}
		assertNoJobs(t, ns)
		assertNoRestarts(t, ns, toy)
	}
}

func deref(f *float64) float64 {
	if f == nil {
		return 0
	}
	return *f
}

func describeRow(c *perfv1.MetricComparison) string {
	if c == nil {
		return "-"
	}
	return fmt.Sprintf("%+.1f%% [%+.1f, %+.1f] MDE %.1f%%", 100*c.Overhead, 100*c.CILow, 100*c.CIHigh, 100*deref(c.MDE))
}
