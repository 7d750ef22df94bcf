package guardrail

import (
	"math"
	"math/rand/v2"
	"time"

	"perfexp.dev/perf-operator/internal/guardrail/heapsim"
	"perfexp.dev/perf-operator/internal/metrics"
)

// The table tests' pods come from heapsim, the generator of the harness in
// test/bench/guardrail, which has the statistics over thousands of runs.

const (
	mb    = heapsim.MB
	gb    = heapsim.GB
	limit = 12 << 30
)

var epoch = time.Unix(1_800_000_000, 0)

func at(sec float64) time.Time { return epoch.Add(time.Duration(sec * float64(time.Second))) }

// newGen is the seed story's pod (heapsim.NewJVM) with a seeded generator.
func newGen(seed uint64) *heapsim.Pod {
	return heapsim.NewJVM(rand.New(rand.NewPCG(seed, 42)))
}

// sample is one sample of pod at t seconds; heapless reports only the working
// set (as a pod without a heap metric, or a flat heapsim pod, does).
func sample(g *heapsim.Pod, pod string, t float64, heapless bool) metrics.Sample {
	h, ws := g.Sample(t)
	s := metrics.Sample{Time: at(t), Pod: pod, CPUCores: math.NaN(), HeapBytes: h, WorkingSetBytes: ws}
	if heapless {
		s.HeapBytes = math.NaN()
	}
	return s
}

// scenario plays one pod: recorded until toggle, observed from toggle to end
// (seconds), with the default guardrails. It returns the first breach and when
// it came, in seconds.
type scenario struct {
	seed     uint64
	gen      *heapsim.Pod
	cfg      Config
	every    float64 // sampling interval, seconds
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
	return &scenario{seed: seed, gen: newGen(seed), cfg: defaultConfig(), every: 15, toggle: toggle, end: end}
}

func (sc *scenario) play() (*Breach, float64) {
	var st State
	sc.cfg.Interval = time.Duration(sc.every * float64(time.Second))
	for t := sc.from; t < sc.end; t += sc.every {
		if sc.before != nil {
			sc.before(t, sc, &st)
		}
		smp := []metrics.Sample{sample(sc.gen, "app-0", t, sc.heapless)}
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
