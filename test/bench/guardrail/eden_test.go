package guardrailbench

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"perfexp.dev/perf-operator/internal/guardrail/edensim"
)

// edenCell is one condition of the independent heap model (edensim): young
// collections when the eden fills, a load curve, per-cycle allocation
// jitter, promotion into an old generation reclaimed by mixed collections.
type edenCell struct {
	noise, period, interval float64
	// promotion is the mean promoted per young collection (MB); gain the
	// toggle's extra allocation (0.3: +30 %), leak what it retains (MB/min).
	promotion, gain, leak float64
}

func (c edenCell) kind() string {
	switch {
	case c.leak > 0:
		return fmt.Sprintf("leak +%.0f MB/min", c.leak)
	case c.gain > 0:
		return fmt.Sprintf("allocation +%.0f %%", 100*c.gain)
	}
	return fmt.Sprintf("healthy, %2.0f MB promoted", c.promotion)
}

// run is one experiment on one pod of the model: 20 minutes recorded before
// the toggle, then guarded; a leak starts at the toggle plus up to one
// interval.
func (c edenCell) run(seed uint64, guarded float64) *run {
	rng := rand.New(rand.NewPCG(seed, 0xede5))
	r := &run{rng: rng, cfg: config(c.interval), interval: c.interval, onset: math.Inf(1), jitter: 0.5, resetAt: math.Inf(1)}
	r.toggle = math.Ceil((baseline+60*rng.Float64())/c.interval) * c.interval
	r.end = r.toggle + guarded
	e := edensim.New(rand.New(rand.NewPCG(seed, 0x90d)), c.period)
	e.Noise, e.Promotion = c.noise, c.promotion*mb
	if c.gain > 0 {
		e.Gain, e.GainAt = 1+c.gain, r.toggle
	}
	p := &pod{name: podName(0, 0), eden: e, until: math.Inf(1)}
	if c.leak > 0 {
		r.onset = r.toggle + c.interval*rng.Float64()
		e.Leak, e.LeakOnset, p.leaks = c.leak*mb/60, r.onset, true
	}
	r.pods = []*pod{p}
	return r
}

// TestIndependentHeapModel plays the guardrail on the independent model
// (edensim) over noise, GC period and sampling: healthy pods with and without
// promotion, a toggle that allocates 30 % more (its GC period shortens, and
// may land near the samples: stroboscopic sampling), and the seed's leak. It
// prints a table. Every leak must be aborted, naming its pod, within 20
// minutes, and healthy pods must never be, also those promoting 30 MB per
// collection, whose old generation grows by about 30 MB/min until mixed
// collections reclaim it (the jump took 8 of them for a leak in 21,600
// pod-hours on the five seed sets while the load rose, 2 after the band
// followed the floors' creep, none since its physical bound comes from the
// newer floors: TestCreepingOldGeneration), nor the allocation toggle, whose
// stroboscopic climbs end higher than the last (12 aborts in 21,600
// pod-hours on the five seed sets before a slow fall vetoed like a drop, 2
// before a descent counted beside one: TestDescendingStrobe).
func TestIndependentHeapModel(t *testing.T) {
	off := offset(t)
	n, guarded := runs(4, 15), 3*hour
	var cells []edenCell
	for _, noise := range noises {
		for _, pi := range [][2]float64{{60, 15}, {20, 15}, {120, 15}, {60, 30}, {30, 10}, {45, 15}} {
			for _, k := range []edenCell{{promotion: 0}, {promotion: 10}, {promotion: 30}, {promotion: 10, gain: 0.3}, {promotion: 10, leak: 700}} {
				k.noise, k.period, k.interval = noise, pi[0], pi[1]
				cells = append(cells, k)
			}
		}
	}
	outs := playAll(len(cells)*n, func(i int) *run {
		c := cells[i/n]
		g := guarded
		if c.leak > 0 {
			g = 20 * 60
		}
		return c.run(off+3_000_000+uint64(i), g)
	})
	var b strings.Builder
	fmt.Fprintf(&b, "Independent heap model (edensim), %d runs a cell, healthy runs guarded %.0f h (seed offset %d)\n", n, guarded/hour, off)
	fmt.Fprintf(&b, "%-6s %-14s %-26s %s\n", "noise", "GC, sampling", "pod", "false aborts in pod-hours, or leak p50 / p95 / max s (by growth)")
	for ci, c := range cells {
		cell := outs[ci*n : (ci+1)*n]
		row := fmt.Sprintf("%4.1f %%  GC ~%3.0f s, %2.0f s  %-26s ", 100*c.noise, c.period, c.interval, c.kind())
		if c.leak > 0 {
			l := leakOutcomes(cell)
			fmt.Fprintf(&b, "%s%.0f / %.0f / %.0f (%d of %d)\n", row, l.quantile(0.5), l.quantile(0.95), l.quantile(1), l.growth, n)
			if l.missed() > 0 {
				t.Errorf("%s: %d of %d leaks not aborted, naming their pod, within 20 minutes", row, l.missed(), n)
			}
			continue
		}
		aborts, hours := 0, 0.0
		first := ""
		for _, o := range cell {
			hours += o.podHours
			if o.breach == nil {
				continue
			}
			aborts++
			if first == "" {
				first = fmt.Sprintf(", first after %.0f s: %s", o.after, o.breach.Message)
			}
		}
		fmt.Fprintf(&b, "%s%d in %.0f%s\n", row, aborts, hours, first)
		if aborts > 0 {
			t.Errorf("healthy pod aborted: %s%d in %.0f%s", row, aborts, hours, first)
		}
	}
	t.Log(b.String())
}

// TestIndependentHeapModelFactors: what slows the seed's leak down on the
// independent model, one mechanism at a time (0.3 % noise, GC ~60 s, 15 s
// samples, 10 MB promoted). With none of its extra mechanics (load curve,
// per-cycle variation, promotion, wandering live set) the model is the seed
// story of heapsim, and the leak must be aborted within its bar (135 s) at
// p95; the rest is printed (README, "An independent heap model").
func TestIndependentHeapModelFactors(t *testing.T) {
	off := offset(t)
	n := runs(40, 5)
	factors := []struct {
		name string
		edit func(e *edensim.Pod)
	}{
		{"the model as it is", func(*edensim.Pod) {}},
		{"no load curve", func(e *edensim.Pod) { e.Load = 0 }},
		{"no per-cycle variation", func(e *edensim.Pod) { e.CycleJitter = 0 }},
		{"no promotion", func(e *edensim.Pod) { e.Promotion = 0 }},
		{"no wandering live set", func(e *edensim.Pod) { e.Wander = 0 }},
		{"heapsim's 2.9 % per cycle only", func(e *edensim.Pod) { e.Load, e.Promotion, e.Wander, e.CycleJitter = 0, 0, 0, 0.029 }},
		{"none of them", func(e *edensim.Pod) { e.Load, e.Promotion, e.Wander, e.CycleJitter = 0, 0, 0, 0 }},
	}
	c := edenCell{noise: 0.003, period: 60, interval: 15, promotion: 10, leak: 700}
	var b strings.Builder
	fmt.Fprintf(&b, "The seed's leak on the independent model, one mechanism off at a time (0.3 %%, GC ~60 s, 15 s; %d runs; seed offset %d)\n", n, off)
	for _, f := range factors {
		outs := playAll(n, func(i int) *run {
			r := c.run(off+4_000_000+uint64(i), 20*60)
			f.edit(r.pods[0].eden)
			return r
		})
		l := leakOutcomes(outs)
		p95 := l.quantile(0.95)
		fmt.Fprintf(&b, "  %-32s p50 %4.0f s  p95 %4.0f s\n", f.name, l.quantile(0.5), p95)
		if f.name == "none of them" && p95 > 135 {
			t.Errorf("with none of its extra mechanics the model's leak took p95 %.0f s, want ≤ 135 s (the seed story's bar, met on heapsim)", p95)
		}
	}
	t.Log(b.String())
}

// TestCreepingOldGeneration replays the healthy runs of
// TestIndependentHeapModel (30 MB promoted per collection, GC ~60 s, 15 s
// samples) that the jump aborted on the five seed sets: the old generation
// filled at about 30 MB/min, under the limit, while the load rose. Six have
// passed since the band follows the floors' creep (creep,
// internal/guardrail/jump.go); the other two (13000153 and 18000126: the
// floors' phase spread hides their creep from the trend test) since the
// band's physical bound comes from the newer floors (band).
func TestCreepingOldGeneration(t *testing.T) {
	replayHealthy(t, edenCell{period: 60, interval: 15, promotion: 30}, []edenRun{
		{0.01, 3001978}, {0.003, 8000124}, {0.01, 8001953}, {0.003, 13000128},
		{0.003, 13000153}, {0.003, 13000170}, {0.003, 18000126}, {0.01, 23001951},
	})
}

// edenRun is one replayed run of the independent model: its noise and seed.
type edenRun struct {
	noise float64
	seed  uint64
}

// replayHealthy plays cell c at each run's noise and seed for three guarded
// hours, and fails on any abort.
func replayHealthy(t *testing.T, c edenCell, runs []edenRun) {
	t.Helper()
	for _, r := range runs {
		c.noise = r.noise
		o := playAll(1, func(int) *run { return c.run(r.seed, 3*hour) })[0]
		if o.breach != nil {
			t.Errorf("seed %d (%.1f %% noise, %s): aborted %.0f s after the toggle: %s", r.seed, 100*r.noise, c.kind(), o.after, o.breach.Message)
		}
	}
}

// TestDescendingStrobe replays the runs of TestIndependentHeapModel's
// allocation toggle (GC ~20 s, +30 %, 15 s samples) that the sustained rise
// aborted at seed offsets 0 and 5,000,000: the GC period moved across the
// interval with the load, so the samples descended the tooth for minutes
// without a sudden drop, then climbed it. Since a slow fall vetoes like a
// drop (deepestDescent, internal/guardrail/sustain.go) none may be aborted.
// The last two, from offsets 10,000,000 and 20,000,000, held a small wrap's
// drop beside the descent and climbed ~200 MB past the descent's start (the
// old generation grows under the tooth): they pass since a descent counts
// beside a drop and its reach rises at the growth limit; neither change
// alone passes them.
func TestDescendingStrobe(t *testing.T) {
	replayHealthy(t, edenCell{period: 20, interval: 15, promotion: 10, gain: 0.3}, []edenRun{
		{0.003, 3000482}, {0.01, 3002330}, {0.03, 3005880}, {0.003, 8000497}, {0.01, 8002287},
		{0.02, 13004081}, {0.03, 23005900},
	})
}
