package guardrail

import (
	"math"
	"math/rand/v2"
	"time"

	"perfexp.dev/perf-operator/internal/metrics"
)

// A small, seeded JVM heap generator for the table tests: the seed story's
// sawtooth (1.2 → 3.9 GB, a GC every 60 s ±10 %, allocation ±5 % per cycle) with
// optional leak, steps, spikes, gaps and warm-up. test/bench/guardrail has the
// full simulator and the statistics over thousands of runs.

const (
	mb    = 1e6
	gb    = 1e9
	limit = 12 << 30
)

var epoch = time.Unix(1_800_000_000, 0)

func at(sec float64) time.Time { return epoch.Add(time.Duration(sec * float64(time.Second))) }

type heapGen struct {
	rng                *rand.Rand
	lastGC, nextGC     float64
	floor, rate        float64
	leak, onset        float64
	leakAtGC           bool
	allocGain, allocAt float64
	steps              map[float64]float64 // time → size
	spikes             map[int]float64     // sample index → factor
	noise              float64
	started, warm      float64
	flat               bool // no sawtooth: a steady working set
	index              int
}

func newGen(seed uint64) *heapGen {
	g := &heapGen{rng: rand.New(rand.NewPCG(seed, 42)), onset: math.Inf(1), allocAt: math.Inf(1),
		allocGain: 1, noise: 0.003, started: math.Inf(-1), steps: map[float64]float64{}, spikes: map[int]float64{}}
	g.lastGC = -60 * g.rng.Float64()
	g.cycle()
	return g
}

func (g *heapGen) cycle() {
	g.floor = 1.2 * gb * (1 + 0.01*g.rng.NormFloat64())
	g.rate = 2.7 * gb / 60 * (0.95 + 0.1*g.rng.Float64())
	g.nextGC = g.lastGC + 60*(0.9+0.2*g.rng.Float64())
}

func (g *heapGen) heap(t float64) float64 {
	for !g.flat && t >= g.nextGC {
		g.lastGC = g.nextGC
		g.cycle()
	}
	h := 3 * gb
	if !g.flat {
		rate := g.rate
		if t >= g.allocAt {
			rate *= g.allocGain
		}
		h = g.floor + rate*(t-g.lastGC)
	}
	switch {
	case g.leakAtGC && g.lastGC > g.onset:
		h += g.leak * (g.lastGC - g.onset)
	case !g.leakAtGC && t > g.onset:
		h += g.leak * (t - g.onset)
	}
	for when, size := range g.steps {
		if t >= when {
			h += size
		}
	}
	if age := t - g.started; age < g.warm {
		h = 200*mb + age/g.warm*(h-200*mb)
	}
	h *= 1 + g.noise*g.rng.NormFloat64()
	if f, ok := g.spikes[g.index]; ok {
		h *= f
	}
	g.index++
	return h
}

// sample is one 15 s sample of pod at t seconds; heapless reports only the
// working set.
func (g *heapGen) sample(pod string, t float64, heapless bool) metrics.Sample {
	h := g.heap(t)
	s := metrics.Sample{Time: at(t), Pod: pod, CPUCores: math.NaN(), HeapBytes: h, WorkingSetBytes: h + 600*mb}
	if heapless {
		s.HeapBytes = math.NaN()
	}
	return s
}

// scenario plays one pod: recorded until toggle, observed from toggle to end
// (seconds), with the default guardrails. It returns the first breach and when
// it came, in seconds.
type scenario struct {
	gen      *heapGen
	cfg      Config
	toggle   float64
	end      float64
	from     float64 // the pod's first sample (seconds)
	heapless bool
	started  time.Time
	restarts int32
	// before, when set, is called before each sample (to change the pod).
	before func(t float64, s *scenario, st *State)
	// roundTrip marshals and unmarshals the state after every call, as the
	// engine does.
	roundTrip bool
}

func defaultConfig() Config {
	return Config{MaxGrowthPerMinute: 100 << 20, MaxUtilization: 0.9, ConsecutiveBreaches: 3, Interval: 15 * time.Second}
}

func newScenario(seed uint64, toggle, end float64) *scenario {
	return &scenario{gen: newGen(seed), cfg: defaultConfig(), toggle: toggle, end: end}
}

func (sc *scenario) play() (*Breach, float64) {
	var st State
	for t := sc.from; t < sc.end; t += 15 {
		if sc.before != nil {
			sc.before(t, sc, &st)
		}
		smp := []metrics.Sample{sc.gen.sample("app-0", t, sc.heapless)}
		pods := []PodState{{Name: "app-0", Restarts: sc.restarts, StartedAt: sc.started}}
		if t < sc.toggle {
			st.Record(sc.cfg, smp, pods, at(t))
		} else if b := st.Observe(sc.cfg, smp, pods, limit, at(t)); b != nil {
			return b, t
		}
		if sc.roundTrip {
			st = roundTrip(st)
		}
	}
	return nil, math.Inf(1)
}
