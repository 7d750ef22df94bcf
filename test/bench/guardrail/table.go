package guardrailbench

import (
	"fmt"
	"math"
	"slices"
	"strings"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
	"perfexp.dev/perf-operator/internal/guardrail/heapsim"
)

// leakCell is one measured cell: seconds from onset to the abort of a leaking
// pod, +Inf when the run ended (20 minutes after onset) without one, or when
// the abort named a pod that does not leak.
type leakCell struct {
	c      cond
	delays []float64
	growth int // aborts by HeapGrowth (the rest by MemoryLimit)
	wrong  int // aborts of a pod that does not leak
}

// measureLeak plays runs of the cell with seeds offset, offset+1, ….
func measureLeak(c cond, runs int, offset uint64) leakCell {
	cell := leakOutcomes(playAll(runs, func(i int) *run { return c.leakRun(offset + uint64(i)) }))
	cell.c = c
	return cell
}

// leakOutcomes reads leak runs into a cell (without its condition): the
// delays from onset to the abort of a leaking pod, sorted (+Inf for a leak
// not aborted, or a healthy pod aborted first), how many were aborts by
// HeapGrowth, and how many of a healthy pod.
func leakOutcomes(out []outcome) leakCell {
	var l leakCell
	for _, o := range out {
		d := math.Inf(1)
		switch {
		case o.breach != nil && !o.leaker:
			l.wrong++
		case o.breach != nil:
			d = o.after
			if o.breach.Reason == perfv1.ReasonHeapGrowth {
				l.growth++
			}
		}
		l.delays = append(l.delays, d)
	}
	slices.Sort(l.delays)
	return l
}

// quantile is the q-quantile of the sorted delays (nearest rank).
func (l leakCell) quantile(q float64) float64 {
	return l.delays[int(math.Ceil(q*float64(len(l.delays))))-1]
}

func (l leakCell) missed() int {
	n := 0
	for _, d := range l.delays {
		if math.IsInf(d, 1) {
			n++
		}
	}
	return n
}

// meets reports whether p95 is within the cell's bar (true when it has none).
func (l leakCell) meets() bool {
	return l.c.bar() == 0 || l.quantile(0.95) <= l.c.bar()
}

const leakHeader = "%-58s %5s %6s %6s %6s %6s %6s %7s %5s %s\n"

func (l leakCell) row() string {
	s := func(v float64) string {
		if math.IsInf(v, 1) {
			return "never"
		}
		return fmt.Sprintf("%.0f", v)
	}
	bar, ok := "-", ""
	if b := l.c.bar(); b > 0 {
		bar, ok = fmt.Sprintf("%.0f", b), "ok"
		if !l.meets() {
			ok = "MISS"
		}
	}
	growth := "-"
	if caught := len(l.delays) - l.missed(); caught > 0 {
		growth = fmt.Sprintf("%.0f%%", 100*float64(l.growth)/float64(caught))
	}
	return fmt.Sprintf("%-58s %5d %6s %6s %6s %6d %6d %7s %5s %s\n", l.c, len(l.delays), s(l.quantile(0.5)),
		s(l.quantile(0.95)), s(l.quantile(1)), l.missed(), l.wrong, growth, bar, ok)
}

func leakTable(title string, cells []leakCell) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n%s\n", title)
	b.WriteString("(seconds from onset to the abort of a leaking pod; missed: no abort within 20 minutes; wrong: a healthy\n" +
		"pod aborted first; growth: share of aborts by HeapGrowth, the rest by MemoryLimit at 90 %; bar: issue 11's)\n")
	fmt.Fprintf(&b, leakHeader, "cell (noise, GC, sampling, leaking/pods, leak)", "runs", "p50 s", "p95 s", "max s", "missed", "wrong", "growth", "bar s", "")
	for _, l := range cells {
		b.WriteString(l.row())
	}
	return b.String()
}

// healthyCell is the false aborts of one noise level over the healthy mix.
type healthyCell struct {
	noise    float64
	kind     heapsim.NoiseKind
	podHours float64
	aborts   []string
}

// measureHealthy plays healthy runs 0..runs-1 with their seeds shifted by
// offset.
func measureHealthy(noise float64, kind heapsim.NoiseKind, runs int, offset uint64, guarded float64) healthyCell {
	out := playAll(runs, func(i int) *run { return healthyRun(noise, kind, i, offset, guarded) })
	cell := healthyCell{noise: noise, kind: kind}
	for i, o := range out {
		cell.podHours += o.podHours
		if o.breach != nil {
			s := healthyMix[i%len(healthyMix)]
			h := healthyPatterns[(i/len(healthyMix))%len(healthyPatterns)]
			cell.aborts = append(cell.aborts, fmt.Sprintf("run %d (%s, GC %.0f s aliased=%v every %.0f s) after %.0f s: %s: %s",
				i, h.name, s.period, s.aliased, s.interval, o.after, o.breach.Reason, o.breach.Message))
		}
	}
	return cell
}

func healthyTable(cells []healthyCell, offset uint64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nFalse aborts on healthy pods (%d patterns × %d samplings, 2 pods per run, 20 minutes recorded then\n"+
		"5 or 10 hours guarded; see scenarios.go; seed offset %d):\n", len(healthyPatterns), len(healthyMix), offset)
	fmt.Fprintf(&b, "%-12s %12s %8s %22s\n", "noise", "pod-hours", "aborts", "per 10,000 pod-hours")
	for _, c := range cells {
		fmt.Fprintf(&b, "%5.1f%% %-5s %12.0f %8d %22.2f\n", 100*c.noise, c.kind, c.podHours, len(c.aborts),
			float64(len(c.aborts))/c.podHours*1e4)
	}
	for _, c := range cells {
		for _, a := range c.aborts {
			fmt.Fprintf(&b, "  %.1f%% %s: %s\n", 100*c.noise, c.kind, a)
		}
	}
	return b.String()
}
