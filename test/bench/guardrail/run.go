package guardrailbench

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"perfexp.dev/perf-operator/internal/guardrail"
	"perfexp.dev/perf-operator/internal/metrics"
)

// config is the guardrails as an experiment with default settings gets them.
func config() guardrail.Config {
	return guardrail.Config{MaxGrowthPerMinute: 100 << 20, MaxUtilization: 0.9,
		ConsecutiveBreaches: 3, Interval: 15 * time.Second}
}

// pod is one simulated target pod: it exists from `from` to `until` (seconds).
type pod struct {
	name        string
	jvm         *jvm
	from, until float64
	restarts    int32
}

// run is one simulated experiment: samples every interval, recorded before the
// toggle (the baseline window) and observed from the toggle on, as the engine
// does.
type run struct {
	rng      *rand.Rand
	cfg      guardrail.Config
	pods     []*pod
	toggle   float64 // when the toggle is applied: the first Observe
	end      float64
	jitter   float64 // ± seconds on each sample's timestamp
	missing  float64 // probability that a sample has no heap (NaN)
	onSample func(t float64)
	// noRecord drops the samples before the toggle instead of recording them:
	// the guardrails start blind, as when the engine only calls Observe.
	noRecord bool
	// resetAt is when the caller calls Reset (a new stage), +Inf for never.
	resetAt float64
}

// outcome is what happened in a run (times in seconds after the toggle).
type outcome struct {
	breach   *guardrail.Breach
	after    float64 // when the guardrails aborted, +Inf if never
	naive    float64 // when a "> 90 % of the limit" rule would have, +Inf if never
	observed int     // pod samples passed to Observe
}

const interval = 15.0

// play runs the experiment; with untilNaive it carries on after the abort until
// the naive rule trips too, to compare both on the same trace.
func (r *run) play(untilNaive bool) outcome {
	var st guardrail.State
	out := outcome{after: math.Inf(1), naive: math.Inf(1)}
	samples := make([]metrics.Sample, 0, len(r.pods))
	states := make([]guardrail.PodState, 0, len(r.pods))
	for t := 0.0; t < r.end; t += interval {
		if r.onSample != nil {
			r.onSample(t)
		}
		samples, states = samples[:0], states[:0]
		for _, p := range r.pods {
			if t < p.from || t >= p.until {
				continue
			}
			ts := t + r.jitter*(2*r.rng.Float64()-1)
			heap, ws := p.jvm.sample(ts)
			if r.rng.Float64() < r.missing {
				heap = math.NaN()
			}
			samples = append(samples, metrics.Sample{Time: at(ts), Pod: p.name, CPUCores: math.NaN(), WorkingSetBytes: ws, HeapBytes: heap})
			states = append(states, guardrail.PodState{Name: p.name, Restarts: p.restarts, StartedAt: at(p.jvm.started)})
			if t >= r.toggle && ws > 0.9*limitBytes && math.IsInf(out.naive, 1) {
				out.naive = t - r.toggle
			}
		}
		if t < r.toggle {
			if !r.noRecord {
				st.Record(r.cfg, samples, states, at(t))
			}
			continue
		}
		if t >= r.resetAt {
			st.Reset()
			r.resetAt = math.Inf(1)
		}
		if out.breach == nil {
			out.observed += len(samples)
			if b := st.Observe(r.cfg, samples, states, limitBytes, at(t)); b != nil {
				out.breach, out.after = b, t-r.toggle
			}
		}
		if out.breach != nil && (!untilNaive || !math.IsInf(out.naive, 1)) {
			break
		}
	}
	return out
}

// newRun makes a run with n long-running pods, recorded for 20 minutes (plus a
// random fraction of a GC cycle, so the toggle lands at any phase) before the
// toggle, then guarded for `guarded` seconds.
func newRun(seed uint64, n int, guarded float64) *run {
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	r := &run{rng: rng, cfg: config(), toggle: 20*60 + basePeriod*rng.Float64(), jitter: 0.5, resetAt: math.Inf(1)}
	r.end = r.toggle + guarded
	for i := 0; i < n; i++ {
		r.pods = append(r.pods, &pod{name: fmt.Sprintf("app-%d", i), jvm: newJVM(rng, -3600),
			from: 0, until: math.Inf(1)})
	}
	return r
}
