package guardrailbench

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
	"perfexp.dev/perf-operator/internal/guardrail"
	"perfexp.dev/perf-operator/internal/metrics"
)

// The bars of DESIGN.md §7, asserted on seeded simulations. Run
//
//	go test ./test/bench/guardrail -run . -v
//
// to print the tables.

const (
	leakSeeds        = 200
	falseAbortRuns   = 200 // per scenario; ten guarded hours each
	maxDetectSeconds = 120 // two GC cycles of the seed story
)

// delays summarises seconds-to-abort; +Inf means never.
type delays []float64

func (d delays) row(name string) string {
	s := slices.Clone(d)
	slices.Sort(s)
	missed := len(s) - slices.IndexFunc(s, func(v float64) bool { return math.IsInf(v, 1) })
	if missed > len(s) {
		missed = 0
	}
	q := func(f float64) string {
		v := s[int(math.Round(f*float64(len(s)-1)))]
		if math.IsInf(v, 1) {
			return "never"
		}
		return fmt.Sprintf("%.0f s", v)
	}
	return fmt.Sprintf("  %-44s %7s %7s %7s %7s %7d\n", name, q(0), q(0.5), q(0.9), q(1), missed)
}

const delayHeader = "  %-44s %7s %7s %7s %7s %7s\n"

func playDelays(n int, build func(seed uint64) *run, untilNaive bool) ([]outcome, delays, delays) {
	out := playAll(n, func(i int) *run { return build(uint64(i)) }, untilNaive)
	var guard, naive delays
	for _, o := range out {
		guard, naive = append(guard, o.after), append(naive, o.naive)
	}
	return out, guard, naive
}

// TestLeakDetection: the seed story's leak (+700 MB/min from the toggle on) is
// aborted within two GC cycles (120 s) for every seed, by the growth rule.
func TestLeakDetection(t *testing.T) {
	out, guard, naive := playDelays(leakSeeds, leakRun, true)
	var b strings.Builder
	fmt.Fprintf(&b, "\nRunaway heap, seed story: +700 MB/min from the toggle on, on a 1.2→3.9 GB sawtooth\n")
	fmt.Fprintf(&b, "(GC every 60 s ±10 %%, allocation ±5 %% per cycle), 15 s samples, 12 GiB limit, %d seeds;\n", leakSeeds)
	fmt.Fprintf(&b, "seconds from onset (the toggle, at a random GC phase) to abort:\n")
	fmt.Fprintf(&b, delayHeader, "rule", "min", "median", "p90", "max", "missed")
	b.WriteString(guard.row("guardrail (HeapGrowth, 3 breaches in a row)"))
	b.WriteString(naive.row(`naive "working set > 90 % of the limit"`))
	fmt.Fprintf(&b, "  example message: %s\n", out[0].breach.Message)
	t.Log(b.String())
	for seed, o := range out {
		switch {
		case o.breach == nil:
			t.Errorf("seed %d: the leak was never aborted", seed)
		case o.breach.Reason != perfv1.ReasonHeapGrowth:
			t.Errorf("seed %d: aborted for %s, want %s: %s", seed, o.breach.Reason, perfv1.ReasonHeapGrowth, o.breach.Message)
		case o.after > maxDetectSeconds:
			t.Errorf("seed %d: aborted %.0f s after onset, bar is %d s", seed, o.after, maxDetectSeconds)
		}
	}
}

// TestFalseAborts: 10,000 guarded hours of healthy, stepping, spiking,
// rolling-out and noisy pods abort nothing.
func TestFalseAborts(t *testing.T) {
	var b strings.Builder
	fmt.Fprintf(&b, "\nFalse aborts, %d runs × 10 guarded hours per scenario (after 20 recorded minutes):\n", falseAbortRuns)
	fmt.Fprintf(&b, "  %-30s %6s %10s %10s %12s %7s\n", "scenario", "runs", "hours", "pod-hours", "pod samples", "aborts")
	var runs, samples, aborts int
	for _, sc := range falseAbortScenarios {
		out := playAll(falseAbortRuns, func(i int) *run { return sc.build(uint64(i)) }, false)
		n, obs := 0, 0
		for i, o := range out {
			obs += o.observed
			if o.breach != nil {
				n++
				t.Errorf("%s, run %d: false abort after %.0f s: %s: %s", sc.name, i, o.after, o.breach.Reason, o.breach.Message)
			}
		}
		runs, samples, aborts = runs+len(out), samples+obs, aborts+n
		fmt.Fprintf(&b, "  %-30s %6d %10d %10.0f %12d %7d\n", sc.name, len(out), 10*len(out), float64(obs)*interval/hour, obs, n)
	}
	fmt.Fprintf(&b, "  %-30s %6d %10d %10.0f %12d %7d\n", "total", runs, 10*runs, float64(samples)*interval/hour, samples, aborts)
	t.Log(b.String())
}

// TestBeyondTheBars prints how the rule behaves where DESIGN.md sets no bar, and
// asserts the two properties its design promises: a toggle that adds 5 %
// allocation without retaining it, and a load change with Reset, abort nothing.
func TestBeyondTheBars(t *testing.T) {
	var b strings.Builder
	fmt.Fprintf(&b, "\nBeyond the bars (%d seeds each), seconds from onset to abort:\n", leakSeeds)
	fmt.Fprintf(&b, delayHeader, "scenario", "min", "median", "p90", "max", "missed")
	for _, row := range []struct {
		name  string
		build func(uint64) *run
	}{
		{"+700 MB/min, nothing recorded before toggle", blindLeakRun},
		{"+700 MB/min retained at GC (teeth unchanged)", leakAtGCRun},
		{"+300 MB/min", func(s uint64) *run { return leakAt(s, 300*mb/60) }},
		{"+200 MB/min", func(s uint64) *run { return leakAt(s, 200*mb/60) }},
	} {
		_, guard, _ := playDelays(leakSeeds, row.build, false)
		b.WriteString(guard.row(row.name))
	}
	fmt.Fprintf(&b, "Runs aborted where nothing leaks (%d seeds each, 30 min or 3 h guarded):\n", leakSeeds)
	for _, row := range []struct {
		name   string
		build  func(uint64) *run
		assert bool
	}{
		{"allocation +5 % at the toggle", func(s uint64) *run { return allocRun(s, 1.05) }, true},
		{"allocation +10 % at the toggle", func(s uint64) *run { return allocRun(s, 1.1) }, false},
		{"allocation +30 % at the toggle", func(s uint64) *run { return allocRun(s, 1.3) }, false},
		{"load ×2 at a stage change, Reset called", func(s uint64) *run { return loadChangeRun(s, true) }, true},
		{"load ×2 at a stage change, no Reset", func(s uint64) *run { return loadChangeRun(s, false) }, false},
	} {
		out, guard, _ := playDelays(leakSeeds, row.build, false)
		n := len(out) - strings.Count(fmt.Sprint(guard), "+Inf")
		fmt.Fprintf(&b, "  %-44s %7d of %d\n", row.name, n, len(out))
		if row.assert && n > 0 {
			t.Errorf("%s: %d false aborts", row.name, n)
		}
	}
	t.Log(b.String())
}

// BenchmarkObserve is the cost of one Observe call for one pod whose history is
// full (64 points): the per-sample cost of the guardrails.
func BenchmarkObserve(b *testing.B) {
	r := newRun(1, 1, 0)
	var st guardrail.State
	p := r.pods[0]
	smp := make([]metrics.Sample, 1)
	states := []guardrail.PodState{{Name: p.name, StartedAt: at(p.jvm.started)}}
	t := 0.0
	feed := func() {
		heap, ws := p.jvm.sample(t)
		smp[0] = metrics.Sample{Time: at(t), Pod: p.name, WorkingSetBytes: ws, HeapBytes: heap}
		t += interval
	}
	for i := 0; i < 80; i++ {
		feed()
		st.Record(r.cfg, smp, states, at(t))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		feed()
		if br := st.Observe(r.cfg, smp, states, limitBytes, at(t)); br != nil {
			b.Fatal(br.Message)
		}
	}
}
