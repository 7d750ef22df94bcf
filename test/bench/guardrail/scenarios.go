package guardrailbench

import (
	"fmt"
	"math"
	"math/rand/v2"

	"perfexp.dev/perf-operator/internal/guardrail/heapsim"
)

// cond is the conditions of one cell of the sweep.
type cond struct {
	noise float64 // relative per-sample noise (sd) of the heap
	kind  heapsim.NoiseKind
	// period is the mean GC period; aliased makes every cycle exactly that long
	// (a multiple of the interval in every cell that uses it), else ±10 %.
	period  float64
	aliased bool
	// interval is the sampling interval, seconds.
	interval float64
	// pods is the number of target pods; allLeak makes all of them leak, else
	// only the first.
	pods    int
	allLeak bool
	// leak is the retained growth in MB/min, starting delay seconds after the
	// toggle and reaching its rate over ramp seconds; atGC retains it only at
	// GCs (the teeth keep their slope).
	leak, delay, ramp float64
	atGC              bool
	// goWS: a Go service seen only through its working set (no sawtooth).
	goWS bool
	// lost is the chance that a scrape is missing.
	lost float64
	// rateJitter is the allocation rate's relative uniform spread from one GC
	// cycle to the next (heapsim.Pod.RateJitter); 0 keeps the model's ±5 %.
	rateJitter float64
	// evicted is a cache of that many GB held for five minutes and evicted
	// evictedAgo seconds before the leak's onset.
	evicted, evictedAgo float64
}

// seed is the seed story: a 1.2–3.9 GB sawtooth, one GC a minute (±10 %), 15 s
// samples, one pod, +700 MB/min from the toggle on.
func seed() cond {
	return cond{noise: 0.003, period: 60, interval: 15, pods: 1, leak: 700}
}

func (c cond) String() string {
	s := fmt.Sprintf("%4.1f%% %-5s GC %3.0fs", 100*c.noise, c.kind, c.period)
	if c.goWS {
		s = fmt.Sprintf("%4.1f%% %-5s Go WS  ", 100*c.noise, c.kind)
	} else if c.aliased {
		s += " alias"
	} else {
		s += " ±10% "
	}
	s += fmt.Sprintf(" every %2.0fs", c.interval)
	who := "1/1"
	if c.pods > 1 {
		who = fmt.Sprintf("1/%d", c.pods)
		if c.allLeak {
			who = fmt.Sprintf("%d/%d", c.pods, c.pods)
		}
	}
	s += " " + who
	if c.leak > 0 {
		s += fmt.Sprintf(" +%4.0fMB/min", c.leak)
	}
	if c.delay > 0 {
		s += fmt.Sprintf(" @+%.0fm", c.delay/60)
	}
	if c.ramp > 0 {
		s += fmt.Sprintf(" ramp %.0fm", c.ramp/60)
	}
	if c.atGC {
		s += " at-GC"
	}
	if c.lost > 0 {
		s += fmt.Sprintf(" lost %.0f%%", 100*c.lost)
	}
	if c.rateJitter > 0 {
		s += fmt.Sprintf(" alloc ±%.0f%%", 100*c.rateJitter)
	}
	if c.evicted > 0 {
		s += fmt.Sprintf(" %.1fGB evicted %.0fm before", c.evicted, c.evictedAgo/60)
	}
	return s
}

// bar is the bar for the cell in seconds from onset: two GC cycles plus
// one interval when the floor rises by 20 % of the sawtooth's amplitude per
// cycle or more (90 s for a working-set-only leak of 200 MB/min or more); 0
// when the cell has no bar.
func (c cond) bar() float64 {
	switch {
	case c.goWS && c.leak >= 200 && c.ramp == 0:
		return 90
	case c.goWS || c.atGC || c.ramp > 0:
		return 0
	case c.leak*mb/60*c.period >= 0.2*(3.9-1.2)*gb:
		return 2*c.period + c.interval
	}
	return 0
}

func (c cond) newPod(rng *rand.Rand, started float64) *heapsim.Pod {
	var p *heapsim.Pod
	if c.goWS {
		p = heapsim.NewGo(rng)
	} else {
		p = heapsim.NewJVM(rng)
		p.Period = c.period
		if c.aliased {
			p.PeriodJitter = 0
		}
	}
	p.Noise, p.NoiseKind, p.Started = c.noise, c.kind, started
	if c.rateJitter > 0 {
		p.RateJitter = c.rateJitter
	}
	if started > 0 {
		p.Warm = 120 + 60*rng.Float64()
	}
	return p
}

// newRun makes a run with the cell's pods, recorded for 20 minutes plus a
// random fraction of a GC cycle (so the toggle lands at any phase), then
// guarded for `guarded` seconds.
func (c cond) newRun(seed uint64, guarded float64) *run {
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	r := &run{rng: rng, cfg: config(c.interval), interval: c.interval, onset: math.Inf(1),
		jitter: 0.5, lost: c.lost, resetAt: math.Inf(1)}
	r.toggle = baseline + math.Max(c.period, 60)*rng.Float64()
	r.toggle = math.Ceil(r.toggle/c.interval) * c.interval
	r.end = r.toggle + guarded
	for i := 0; i < max(c.pods, 1); i++ {
		r.pods = append(r.pods, &pod{name: podName(0, i), sim: c.newPod(rng, -3600), until: math.Inf(1)})
	}
	return r
}

// leakRun: the cell's leak in the first pod (or all), from the toggle plus
// delay on, at a random phase of the GC cycle; guarded 20 minutes past onset.
func (c cond) leakRun(seed uint64) *run {
	r := c.newRun(seed, c.delay+20*60)
	r.onset = r.toggle + c.delay + c.interval*r.rng.Float64()
	for i, p := range r.pods {
		if i == 0 || c.allLeak {
			p.leaks = true
			p.sim.LeakRate, p.sim.LeakOnset, p.sim.LeakRamp, p.sim.LeakAtGC = c.leak*mb/60, r.onset, c.ramp, c.atGC
		}
		if c.evicted > 0 {
			gone := r.onset - c.evictedAgo
			p.sim.Steps = append(p.sim.Steps, heapsim.Step{At: gone - 300, Size: c.evicted * gb, Until: gone})
		}
	}
	return r
}

// healthy is one healthy pattern: it edits a run guarded for ten hours.
type healthy struct {
	name string
	edit func(c cond, r *run)
}

// healthyPatterns are the traces that must never abort. Sizes are those of the
// issue: steps and cache fills up to 15 % of the 12 GiB limit (1.9 GB), a live
// set that wanders by ±25 % over half an hour to an hour and a half (at most
// 60 MB/min, below the 100 MiB/min limit), toggles that only allocate 10–30 %
// more.
var healthyPatterns = []healthy{
	{"sawtooth", func(cond, *run) {}},
	{"wandering floor", func(c cond, r *run) {
		for _, p := range r.pods {
			// At most ±25 % and at most 60 MB/min at the steepest.
			period := 1800 + 3600*r.rng.Float64()
			p.sim.WanderAmp, p.sim.WanderPeriod = math.Min(0.25, mb*period/(2*math.Pi*p.sim.Floor)), period
		}
	}},
	{"steps ≤ 15 % of limit", func(c cond, r *run) {
		// Every hour a step of 0.1–1.9 GB (up to 15 % of the limit), gone
		// 10–30 minutes later: steps do not pile up beyond 15 %.
		for _, p := range r.pods {
			for h := 0.0; h < 10; h++ {
				up := r.toggle + h*hour + 0.5*hour*r.rng.Float64()
				down := up + 600 + 1200*r.rng.Float64()
				p.sim.Steps = append(p.sim.Steps, heapsim.Step{At: up, Size: (0.1 + 1.8*r.rng.Float64()) * gb, Until: down})
			}
		}
	}},
	{"single-scrape spikes", func(c cond, r *run) {
		for _, p := range r.pods {
			p.sim.SpikeP = 0.01
		}
	}},
	{"periodic cache fills", func(c cond, r *run) {
		for _, p := range r.pods {
			p.sim.FillEvery, p.sim.FillSize = 1200+1200*r.rng.Float64(), (0.3+1.6*r.rng.Float64())*gb
			p.sim.FillRamp, p.sim.FillHold = 15+45*r.rng.Float64(), 300+600*r.rng.Float64()
		}
	}},
	{"allocation-only toggle +10–30 %", func(c cond, r *run) {
		for _, p := range r.pods {
			p.sim.AllocGain, p.sim.AllocAt = 1.1+0.2*r.rng.Float64(), r.toggle
		}
	}},
	{"rollouts and restarts", rollouts},
	{"missing scrapes, late samples", func(c cond, r *run) {
		r.lost, r.noHeap, r.jitter = 0.03, 0.02, 2
	}},
}

// rollouts: every two hours or so a rollout replaces the pods one by one (the
// new pod starts, warms up from 200 MB over 2–3 minutes, the old one goes 90 s
// later); every few hours a container restarts in place. Restarts are allowed
// here (the restart rule has its own tests).
func rollouts(c cond, r *run) {
	r.cfg.MaxRestarts = math.MaxInt32
	gen := 0
	nextRollout := r.toggle + 0.5*hour + hour*r.rng.Float64()
	nextRestart := r.toggle + 3*hour*r.rng.Float64()
	r.onSample = func(t float64) {
		if t >= nextRollout {
			gen++
			for i, old := range r.livePods(t) {
				start := t + float64(i)*120
				r.pods = append(r.pods, &pod{name: podName(gen, i), sim: c.newPod(r.rng, start), from: start, until: math.Inf(1)})
				old.until = start + 90
			}
			nextRollout = t + 1.5*hour + hour*r.rng.Float64()
		}
		if t >= nextRestart {
			if live := r.livePods(t); len(live) > 0 {
				p := live[r.rng.IntN(len(live))]
				p.sim, p.restarts = c.newPod(r.rng, t), p.restarts+1
			}
			nextRestart = t + 2*hour + 2*hour*r.rng.Float64()
		}
	}
}

func (r *run) livePods(t float64) []*pod {
	var live []*pod
	for _, p := range r.pods {
		if t >= p.from && t < p.until {
			live = append(live, p)
		}
	}
	return live
}

// sampling is a GC period and a sampling interval of the healthy mix.
type sampling struct {
	period, interval float64
	aliased          bool
}

// healthyMix are the samplings the healthy runs cycle through: the seed's,
// aliased ones, long and short GC periods, 10 and 30 s samples, and a Go
// working set (period 0).
var healthyMix = []sampling{
	{60, 15, false}, {60, 15, true}, {120, 30, false}, {120, 30, true}, {20, 10, false},
	{30, 15, false}, {90, 15, false}, {45, 15, true}, {60, 30, false}, {0, 15, false},
}

// healthyRun is healthy run i of a noise cell: pattern and sampling cycle
// through their lists, so every pattern meets every sampling; its seed is
// offset + 1,000,000 + i.
func healthyRun(noise float64, kind heapsim.NoiseKind, i int, offset uint64, guarded float64) *run {
	s := healthyMix[i%len(healthyMix)]
	h := healthyPatterns[(i/len(healthyMix))%len(healthyPatterns)]
	c := cond{noise: noise, kind: kind, period: s.period, aliased: s.aliased, interval: s.interval, pods: 2}
	if s.period == 0 {
		c.goWS, c.period = true, 60
	}
	r := c.newRun(offset+uint64(i)+1_000_000, guarded)
	h.edit(c, r)
	return r
}
