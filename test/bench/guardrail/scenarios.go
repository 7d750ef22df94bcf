package guardrailbench

import (
	"fmt"
	"math"
	"runtime"
	"sync"
)

const hour = 3600.0

// leakRun is scenario (a), the seed story: one pod whose heap gains 700 MB/min
// from the moment the toggle is applied, at a random phase of its GC cycle.
func leakRun(seed uint64) *run {
	return leakAt(seed, 700*mb/60)
}

func leakAt(seed uint64, bytesPerSecond float64) *run {
	r := newRun(seed, 1, 30*60)
	j := r.pods[0].jvm
	j.leakRate, j.leakOnset = bytesPerSecond, r.toggle
	return r
}

// leakAtGCRun: the leak retains objects the application allocated anyway: the
// heap after each GC steps up by 700 MB/min × the period, the teeth do not
// steepen.
func leakAtGCRun(seed uint64) *run {
	r := leakRun(seed)
	r.pods[0].jvm.leakAtGC = true
	return r
}

// blindLeakRun is the seed story when nothing was recorded before the toggle.
func blindLeakRun(seed uint64) *run {
	r := leakRun(seed)
	r.noRecord = true
	return r
}

// loadChangeRun: an hour after the toggle the next stage doubles the request
// rate, and with it the allocation rate; reset says whether the caller calls
// Reset when the stage starts.
func loadChangeRun(seed uint64, reset bool) *run {
	r := newRun(seed, 1, 3*hour)
	r.pods[0].jvm.allocGain, r.pods[0].jvm.allocAt = 2, r.toggle+hour
	if reset {
		r.resetAt = r.toggle + hour
	}
	return r
}

// allocRun is a toggle that raises the allocation rate by gain without retaining
// anything: the teeth steepen, the floor stays.
func allocRun(seed uint64, gain float64) *run {
	r := newRun(seed, 1, 30*60)
	r.pods[0].jvm.allocGain, r.pods[0].jvm.allocAt = gain, r.toggle
	return r
}

// The false-abort scenarios (b)–(f): each guards two pods (three for the
// rollout) for ten hours after the toggle.
var falseAbortScenarios = []struct {
	name  string
	build func(seed uint64) *run
}{
	{"(b) healthy sawtooth", func(seed uint64) *run { return newRun(seed, 2, 10*hour) }},
	{"(c) one-off steps of +1 GB", stepRun},
	{"(d) single-scrape spikes", spikeRun},
	{"(e) rollouts and restarts", rolloutRun},
	{"(f) noise, gaps, jitter", noiseRun},
}

// stepRun: every hour each pod's heap steps up by 1 GB at a random moment (a
// cache filling at once) and, 10 to 30 minutes later, back down (evicted).
func stepRun(seed uint64) *run {
	r := newRun(seed, 2, 10*hour)
	for _, p := range r.pods {
		for h := 0.0; h < 10; h++ {
			up := r.toggle + h*hour + 0.5*hour*r.rng.Float64()
			down := up + 600 + 1200*r.rng.Float64()
			p.jvm.steps = append(p.jvm.steps, step{up, 1 * gb}, step{down, -1 * gb})
		}
	}
	return r
}

// spikeRun: one sample in a hundred is a single-scrape spike, ×1.2–2 or ×0.2–0.8.
func spikeRun(seed uint64) *run {
	r := newRun(seed, 2, 10*hour)
	for _, p := range r.pods {
		p.jvm.spikeP = 0.01
	}
	return r
}

// noiseRun: 2 % measurement noise, 2 % of samples without a heap value, and
// timestamps off by up to ±2 s.
func noiseRun(seed uint64) *run {
	r := newRun(seed, 2, 10*hour)
	r.jitter, r.missing = 2, 0.02
	for _, p := range r.pods {
		p.jvm.noise = 0.02
	}
	return r
}

// rolloutRun: three pods; every two hours a rollout replaces them one by one
// (the new pod starts, warms up from 200 MB over 2–3 minutes, and the old one goes
// 90 s later); every three hours a container restarts in place. Restarts are
// allowed here (the restart rule has its own tests): what is measured is that
// fresh and restarted pods do not look like growth.
func rolloutRun(seed uint64) *run {
	r := newRun(seed, 3, 10*hour)
	r.cfg.MaxRestarts = math.MaxInt32
	gen := 0
	nextRollout := r.toggle + 0.5*hour + hour*r.rng.Float64()
	nextRestart := r.toggle + 3*hour*r.rng.Float64()
	r.onSample = func(t float64) {
		if t >= nextRollout {
			gen++
			live := r.livePods(t)
			for i, old := range live {
				start := t + float64(i)*120
				r.pods = append(r.pods, &pod{name: fmt.Sprintf("app-g%d-%d", gen, i),
					jvm: newJVM(r.rng, start), from: start, until: math.Inf(1)})
				old.until = start + 90
			}
			nextRollout = t + 1.5*hour + hour*r.rng.Float64()
		}
		if t >= nextRestart {
			if live := r.livePods(t); len(live) > 0 {
				p := live[r.rng.IntN(len(live))]
				p.jvm, p.restarts = newJVM(r.rng, t), p.restarts+1
			}
			nextRestart = t + 2*hour + 2*hour*r.rng.Float64()
		}
	}
	return r
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

// playAll plays runs 0..n-1 on all CPUs; results are indexed by run, so the
// outcome does not depend on scheduling.
func playAll(n int, build func(i int) *run, untilNaive bool) []outcome {
	out := make([]outcome, n)
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < runtime.GOMAXPROCS(0); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				out[i] = build(i).play(untilNaive)
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	return out
}
