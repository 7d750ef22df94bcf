// Package edensim is a second model of a JVM heap, written apart from heapsim
// so that the guardrail is also judged on traces whose mechanics it was not
// tuned on. Where heapsim puts GCs on their own clock, here a young collection
// comes when the eden is full, so the GC period follows the allocation rate:
// a toggle that allocates more shortens it, a load curve moves it. Allocation
// follows a slow load curve and varies from cycle to cycle; each young
// collection promotes a little into an old generation, which mixed
// collections reclaim over a few cycles once the old generation and the live
// set pass an occupancy threshold; the live set wanders slowly. Noise is
// relative and Gaussian, applied to what is reported. Everything is drawn
// from the Pod's Rng, so a trace is reproducible from its seed.
//
// It found the stroboscopic false aborts (README, "Stroboscopic sampling"):
// a +30 % allocation toggle moved a 20 s GC period onto the 15 s samples.
package edensim

import (
	"math"
	"math/rand/v2"
)

// Units: decimal MB and GB.
const (
	MB = 1e6
	GB = 1e9
)

// Pod is one simulated JVM. Set the fields (New gives the seed story's heap),
// then call Sample with non-decreasing times in seconds.
type Pod struct {
	Rng *rand.Rand

	// Live is the mean live set; it wanders by ±Wander (relative) over
	// WanderPeriod seconds.
	Live, Wander, WanderPeriod float64
	// Eden is the young generation: a young collection comes when this much
	// has been allocated since the last one.
	Eden float64
	// Rate is the mean allocation rate (bytes/s); the load moves it by ±Load
	// (relative) over LoadPeriod seconds, and each cycle's rate is off by a
	// normal relative error of CycleJitter.
	Rate, Load, LoadPeriod, CycleJitter float64
	// Promotion is the mean that a young collection promotes into the old
	// generation (uniform from 0 to twice it). Once the live set and the old
	// generation pass Occupancy, mixed collections reclaim the old generation
	// over the next three to seven young collections.
	Promotion, Occupancy float64
	// Gain multiplies the allocation rate from GainAt on (a toggle that only
	// allocates more; 0: none).
	Gain, GainAt float64
	// Leak is retained from LeakOnset on (bytes/s): it is never collected.
	Leak, LeakOnset float64
	// Noise is the relative standard deviation of what is reported.
	Noise float64
	// Overhead is what the working set holds beyond the heap.
	Overhead float64

	now, used, old, retained, cycle float64
	mixedLeft                       int
	wanderPhase, loadPhase          float64
	started                         bool
}

// New is a heap like the seed story's: a 1.2 GB live set and a 2.7 GB eden
// filled once a minute on average, a few percent of allocation jitter per
// cycle, a load curve of up to ±30 % and 10 MB promoted per collection, with
// the rest of its shape drawn from rng. Its clock starts at 0 with the eden
// part full and the old generation part grown.
func New(rng *rand.Rand, period float64) *Pod {
	p := &Pod{Rng: rng, Live: 1.2 * GB, Wander: 0.1 * rng.Float64(), WanderPeriod: 1800 + 3600*rng.Float64(),
		Eden: 2.7 * GB, Load: 0.3 * rng.Float64(), LoadPeriod: 600 + 1800*rng.Float64(), CycleJitter: 0.05,
		Promotion: 10 * MB, Overhead: 600 * MB, LeakOnset: math.Inf(1), GainAt: math.Inf(1)}
	p.Rate = p.Eden / period
	p.Occupancy = p.Live + 1.5*GB*(0.5+rng.Float64())
	return p
}

func (p *Pod) start() {
	p.started = true
	p.wanderPhase, p.loadPhase = 2*math.Pi*p.Rng.Float64(), 2*math.Pi*p.Rng.Float64()
	p.used = p.Eden * p.Rng.Float64()
	p.old = 0.3 * (p.Occupancy - p.Live) * p.Rng.Float64()
	p.newCycle()
}

func (p *Pod) newCycle() { p.cycle = math.Max(1+p.CycleJitter*p.Rng.NormFloat64(), 0.2) }

func (p *Pod) rate(t float64) float64 {
	r := p.Rate * p.cycle * (1 + p.Load*math.Sin(2*math.Pi*t/p.LoadPeriod+p.loadPhase))
	if t >= p.GainAt && p.Gain > 0 {
		r *= p.Gain
	}
	return r
}

func (p *Pod) live(t float64) float64 {
	return p.Live * (1 + p.Wander*math.Sin(2*math.Pi*t/p.WanderPeriod+p.wanderPhase))
}

// advance runs the collector up to t: the rate is held for at most a second
// at a time, and a young collection happens at the moment the eden fills.
func (p *Pod) advance(t float64) {
	for p.now < t {
		dt := math.Min(1, t-p.now)
		r := p.rate(p.now)
		if fill := (p.Eden - p.used) / r; fill <= dt {
			p.collect(p.now + fill)
			continue
		}
		p.used += r * dt
		p.now += dt
	}
}

// collect is a young collection at time t (a mixed one while mixedLeft > 0).
func (p *Pod) collect(t float64) {
	p.now, p.used = t, 0
	p.old += 2 * p.Promotion * p.Rng.Float64()
	switch {
	case p.mixedLeft > 0:
		p.old -= p.old / float64(p.mixedLeft)
		p.mixedLeft--
	case p.live(t)+p.old > p.Occupancy:
		p.mixedLeft = 3 + p.Rng.IntN(5)
	}
	p.newCycle()
}

// Heap is the heap in use at t, without noise.
func (p *Pod) Heap(t float64) float64 {
	if !p.started {
		p.start()
	}
	p.advance(t)
	leaked := 0.0
	if t > p.LeakOnset {
		leaked = p.Leak * (t - p.LeakOnset)
	}
	return p.live(t) + p.old + leaked + p.used
}

// Sample is what a metrics source reports at t: the heap and the working set,
// each with its own noise.
func (p *Pod) Sample(t float64) (heap, workingSet float64) {
	h := p.Heap(t)
	return h * (1 + p.Noise*p.Rng.NormFloat64()), (h + p.Overhead) * (1 + p.Noise*p.Rng.NormFloat64())
}
