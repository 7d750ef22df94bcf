// Package guardrailbench measures the guardrails on simulated JVM pods: how fast
// the runaway-heap rule catches the seed story's leak, and how often it aborts a
// healthy run. Everything is seeded (math/rand/v2 PCG), so every figure is a
// property of the algorithm on fixed data, not a timing.
package guardrailbench

import (
	"math"
	"math/rand/v2"
	"time"
)

// Units of the seed story: heap sizes in decimal GB and MB, the limit in GiB.
const (
	mb = 1e6
	gb = 1e9
	// limitBytes is the target container's memory limit.
	limitBytes = 12 << 30
	// nonHeap is what the JVM holds besides the heap (metaspace, threads, code).
	nonHeap = 600 * mb
)

// The healthy sawtooth of the seed story: 1.2 GB after GC, climbing to 3.9 GB,
// one GC a minute.
const (
	baseFloor  = 1.2 * gb
	basePeak   = 3.9 * gb
	basePeriod = 60.0 // seconds
)

// jvm simulates one pod's heap. Between GCs the heap climbs at the allocation
// rate; at each GC it falls back to the live set. Jitter, per GC cycle:
//   - period ±10 % (uniform): GC timing follows eden filling up;
//   - allocation rate ±5 % (uniform): the request mix of 1,200 requests varies;
//   - live set (the floor) ±1 % (normal).
//
// The amplitude, rate × period, therefore varies by about ±15 %. A leak, a step
// and a warm-up are added on top.
type jvm struct {
	rng *rand.Rand
	// started is when the container started (seconds of simulated time).
	started float64
	// warm is how long the warm-up takes: the heap climbs from 200 MB to the
	// sawtooth over 2–3 minutes.
	warm float64

	lastGC, nextGC, floor, rate float64

	leakRate, leakOnset float64 // bytes/s, from onset on (additive)
	// leakAtGC retains the leak only at each GC (a floor that steps up at every
	// collection, teeth unchanged), instead of adding it continuously.
	leakAtGC           bool
	allocGain, allocAt float64 // allocation multiplied by allocGain from allocAt
	steps              []step  // one-off level changes
	committed          float64 // the heap the JVM has committed: its peak so far

	noise  float64 // relative measurement noise (sd)
	spikeP float64 // probability of a single-scrape spike per sample
	lastSp int     // sample index of the last spike, to keep spikes single
	index  int
}

type step struct{ at, size float64 }

func newJVM(rng *rand.Rand, started float64) *jvm {
	j := &jvm{rng: rng, started: started, warm: 120 + 60*rng.Float64(),
		noise: 0.003, leakOnset: math.Inf(1), allocAt: math.Inf(1), allocGain: 1, lastSp: -100}
	j.lastGC = started - basePeriod*rng.Float64()
	j.newCycle()
	return j
}

func (j *jvm) newCycle() {
	period := basePeriod * (0.9 + 0.2*j.rng.Float64())
	j.floor = baseFloor * (1 + 0.01*j.rng.NormFloat64())
	j.rate = (basePeak - baseFloor) / basePeriod * (0.95 + 0.1*j.rng.Float64())
	j.nextGC = j.lastGC + period
}

// heap is the true heap at time t (t never goes back).
func (j *jvm) heap(t float64) float64 {
	for t >= j.nextGC {
		j.lastGC = j.nextGC
		j.newCycle()
	}
	rate := j.rate
	if t >= j.allocAt {
		rate *= j.allocGain
	}
	h := j.floor + rate*(t-j.lastGC)
	switch {
	case j.leakAtGC && j.lastGC > j.leakOnset:
		h += j.leakRate * (j.lastGC - j.leakOnset)
	case !j.leakAtGC && t > j.leakOnset:
		h += j.leakRate * (t - j.leakOnset)
	}
	for _, s := range j.steps {
		if t >= s.at {
			h += s.size
		}
	}
	if age := t - j.started; age < j.warm {
		h = 200*mb + age/j.warm*(h-200*mb)
	}
	return h
}

// sample returns what the metrics source reports at t: the heap with
// measurement noise and, rarely, a single-scrape spike; and the working set,
// which follows the committed heap (a JVM does not give memory back).
func (j *jvm) sample(t float64) (heap, workingSet float64) {
	h := j.heap(t)
	j.committed = math.Max(j.committed, h)
	workingSet = (j.committed + nonHeap) * (1 + 0.002*j.rng.NormFloat64())
	heap = h * (1 + j.noise*j.rng.NormFloat64())
	j.index++
	if j.spikeP > 0 && j.index-j.lastSp > 4 && j.rng.Float64() < j.spikeP {
		j.lastSp = j.index
		if j.rng.Float64() < 0.5 {
			heap *= 1.2 + 0.8*j.rng.Float64()
		} else {
			heap *= 0.2 + 0.6*j.rng.Float64()
		}
	}
	return heap, workingSet
}

// at converts simulated seconds to a time.
func at(sec float64) time.Time {
	return time.Unix(1_800_000_000, 0).Add(time.Duration(sec * float64(time.Second)))
}
