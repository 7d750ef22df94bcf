// Package heapsim simulates what a metrics source reports about a pod's memory:
// a JVM heap's GC sawtooth, or a Go working set without one, with leaks, steps,
// cache fills, a wandering live set, allocation changes, warm-up, measurement
// noise (Gaussian or heavy-tailed) and single-scrape spikes.
//
// It is the one generator behind the guardrail's table tests and the simulation
// harness in test/bench/guardrail. It models memory the way a GC log describes
// it, not the way the detector looks at it: GCs come on their own clock (a
// period with jitter, unrelated to the sampling interval), allocation and the
// live set vary per cycle, and noise is applied to what is reported. Everything
// is seeded, so every trace is reproducible.
package heapsim

import (
	"math"
	"math/rand/v2"
)

// Units: heap sizes in decimal GB and MB.
const (
	MB = 1e6
	GB = 1e9
)

// NoiseKind is the distribution of the per-sample measurement noise.
type NoiseKind int

const (
	// Gaussian noise.
	Gaussian NoiseKind = iota
	// StudentT3 is Student's t with three degrees of freedom, scaled to the same
	// standard deviation: heavy tails (an outlier beyond five standard
	// deviations one sample in about 600).
	StudentT3
)

func (k NoiseKind) String() string {
	if k == StudentT3 {
		return "t3"
	}
	return "gauss"
}

// Step is a one-off change of the live set (a cache filled or emptied): Size
// bytes from At until Until (+Inf: for good).
type Step struct{ At, Size, Until float64 }

// Pod is one simulated container. Set the fields, then call Sample with
// non-decreasing times. Times are seconds of simulated time.
type Pod struct {
	Rng *rand.Rand

	// Floor is the live set (heap after GC) and Peak the heap just before a GC,
	// on average. Flat pods have no sawtooth: Floor is their working set.
	Floor, Peak float64
	// Period is the mean time between GCs; PeriodJitter its relative
	// uniform spread (0.1: ±10 %). With 0 every cycle lasts exactly Period.
	Period, PeriodJitter float64
	// RateJitter is the relative uniform spread of the allocation rate from
	// one cycle to the next; FloorJitter the relative standard deviation of the
	// live set after each GC.
	RateJitter, FloorJitter float64
	// Flat: no GC sawtooth (a Go service seen through its working set).
	Flat bool

	// Wander moves the live set slowly: a sine of relative amplitude
	// WanderAmp and period WanderPeriod (seconds), at a random phase.
	WanderAmp, WanderPeriod float64

	// LeakRate is retained growth in bytes per second from LeakOnset on,
	// reached linearly over LeakRamp seconds (0: at once). With LeakAtGC the
	// growth shows only at each GC (the floor steps up, the teeth keep their
	// slope); otherwise it adds continuously.
	LeakRate, LeakOnset, LeakRamp float64
	LeakAtGC                      bool

	// AllocGain multiplies the allocation rate from AllocAt on: extra garbage
	// that the next GC frees (a profiler, tracing).
	AllocGain, AllocAt float64

	Steps []Step
	// Fills are periodic cache fills: every FillEvery seconds (at a random
	// phase) the live set grows by FillSize over FillRamp seconds and is
	// evicted FillHold seconds later.
	FillEvery, FillSize, FillRamp, FillHold float64

	// Noise is the relative standard deviation of the reported heap (and of the
	// working set of a flat pod), NoiseKind its distribution.
	Noise     float64
	NoiseKind NoiseKind
	// SpikeP is the chance that a sample is a single-scrape spike: ×1.2–2 or
	// ×0.2–0.8.
	SpikeP float64
	// Spikes are scripted spikes: the factor of the reported value at the
	// given sample (0 for the first call of Sample).
	Spikes map[int]float64

	// Started is when the container started, Warm how long its warm-up takes:
	// memory climbs from 200 MB to its steady pattern.
	Started, Warm float64
	// NonHeap is what a JVM holds besides the heap; the working set follows
	// the committed heap (its peak so far) plus this.
	NonHeap float64

	lastGC, nextGC, floor, rate float64
	wanderPhase, fillPhase      float64
	committed                   float64
	lastSpike, index            int
	init                        bool
}

// NewJVM is the seed story's pod: a 1.2 → 3.9 GB sawtooth, one GC a minute
// ±10 %, allocation ±5 % and live set ±1 % per cycle, 0.3 % Gaussian noise,
// started long ago.
func NewJVM(rng *rand.Rand) *Pod {
	return &Pod{Rng: rng, Floor: 1.2 * GB, Peak: 3.9 * GB, Period: 60, PeriodJitter: 0.1,
		RateJitter: 0.05, FloorJitter: 0.01, Noise: 0.003, NonHeap: 600 * MB,
		LeakOnset: math.Inf(1), AllocGain: 1, AllocAt: math.Inf(1), Started: -3600}
}

// NewGo is a Go service seen only through its working set: 2 GB, flat,
// 0.3 % Gaussian noise.
func NewGo(rng *rand.Rand) *Pod {
	return &Pod{Rng: rng, Floor: 2 * GB, Flat: true, Noise: 0.003,
		LeakOnset: math.Inf(1), AllocGain: 1, AllocAt: math.Inf(1), Started: -3600}
}

func (p *Pod) start(t float64) {
	p.init, p.lastSpike = true, -100
	p.wanderPhase = 2 * math.Pi * p.Rng.Float64()
	p.fillPhase = p.Rng.Float64()
	if p.Flat || !(p.Period > 0) {
		p.Flat = true
		return
	}
	p.lastGC = math.Min(t, p.Started) - p.Period*p.Rng.Float64()
	p.newCycle()
	for p.nextGC <= t {
		p.lastGC = p.nextGC
		p.newCycle()
	}
}

func (p *Pod) newCycle() {
	if p.Flat {
		return
	}
	p.floor = 1 + p.FloorJitter*p.Rng.NormFloat64()
	p.rate = (p.Peak - p.Floor) / p.Period * (1 + p.RateJitter*(2*p.Rng.Float64()-1))
	p.nextGC = p.lastGC + p.Period*(1+p.PeriodJitter*(2*p.Rng.Float64()-1))
}

// leaked is the growth retained by time t.
func (p *Pod) leaked(t float64) float64 {
	d := t - p.LeakOnset
	if !(d > 0) || p.LeakRate == 0 {
		return 0
	}
	if p.LeakRamp <= 0 || d >= p.LeakRamp {
		return p.LeakRate * (d - p.LeakRamp/2*sign(p.LeakRamp))
	}
	return p.LeakRate * d * d / (2 * p.LeakRamp)
}

func sign(x float64) float64 {
	if x > 0 {
		return 1
	}
	return 0
}

// live is the live set at t, before the leak: floor, wander, steps and fills.
func (p *Pod) live(t float64) float64 {
	v := p.Floor
	if !p.Flat {
		v *= p.floor
	}
	if p.WanderAmp > 0 && p.WanderPeriod > 0 {
		v *= 1 + p.WanderAmp*math.Sin(2*math.Pi*t/p.WanderPeriod+p.wanderPhase)
	}
	for _, s := range p.Steps {
		if t >= s.At && t < s.Until {
			v += s.Size
		}
	}
	if p.FillEvery > 0 {
		since := math.Mod(t/p.FillEvery-p.fillPhase+10, 1) * p.FillEvery
		switch {
		case since < p.FillRamp:
			v += p.FillSize * since / p.FillRamp
		case since < p.FillRamp+p.FillHold:
			v += p.FillSize
		}
	}
	return v
}

// Heap is the true memory at t (heap, or working set for a flat pod), without
// noise. Times must not go back.
func (p *Pod) Heap(t float64) float64 {
	if !p.init {
		p.start(t)
	}
	var h float64
	if p.Flat {
		h = p.live(t) + p.leaked(t)
	} else {
		for t >= p.nextGC {
			p.lastGC = p.nextGC
			p.newCycle()
		}
		rate := p.rate
		if t >= p.AllocAt {
			rate *= p.AllocGain
		}
		// Objects live at the last GC stay; the live set's changes since then
		// show at the next GC, as do leaks retained at GC.
		h = p.live(p.lastGC) + rate*(t-p.lastGC)
		if p.LeakAtGC {
			h += p.leaked(p.lastGC)
		} else {
			h += p.leaked(t)
		}
	}
	if age := t - p.Started; age < p.Warm {
		h = 200*MB + age/p.Warm*(h-200*MB)
	}
	return h
}

// Sample is what the metrics source reports at t: the heap (NaN for a flat
// pod, which has none) and the working set.
func (p *Pod) Sample(t float64) (heap, workingSet float64) {
	h := p.Heap(t)
	noisy := h * (1 + p.Noise*p.draw())
	if f, ok := p.Spikes[p.index]; ok {
		noisy *= f
	}
	p.index++
	if p.SpikeP > 0 && p.index-p.lastSpike > 4 && p.Rng.Float64() < p.SpikeP {
		p.lastSpike = p.index
		if p.Rng.Float64() < 0.5 {
			noisy *= 1.2 + 0.8*p.Rng.Float64()
		} else {
			noisy *= 0.2 + 0.6*p.Rng.Float64()
		}
	}
	if p.Flat {
		return math.NaN(), noisy
	}
	p.committed = math.Max(p.committed, h)
	return noisy, (p.committed + p.NonHeap) * (1 + 0.002*p.Rng.NormFloat64())
}

// draw is one standard noise variate of the pod's kind, of unit variance.
func (p *Pod) draw() float64 {
	z := p.Rng.NormFloat64()
	if p.NoiseKind != StudentT3 {
		return z
	}
	var chi float64
	for i := 0; i < 3; i++ {
		c := p.Rng.NormFloat64()
		chi += c * c
	}
	return z / math.Sqrt(chi/3) / math.Sqrt(3) // t3 has variance 3
}
