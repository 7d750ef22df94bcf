package guardrail

import (
	"math"
	"math/rand/v2"
	"os"
	"sync"
	"testing"

	"perfexp.dev/perf-operator/internal/guardrail/heapsim"
)

// TestSustainMargin (PERF_BENCH_FULL=1 only, a few minutes on two cores): the
// sustained rise alone, on healthy Go working sets, must stay clear of its
// bar. It plays 10-hour pods with the healthy patterns of test/bench/guardrail
// that apply to a working set (flat, a live set wandering at up to 60 MB/min,
// hourly steps of 0.1–1.9 GB undone 10–30 minutes later, single-scrape spikes,
// periodic cache fills of 0.3–1.9 GB over 15–60 s, restarts with a warm-up,
// lost and late scrapes), at 0.3–3 % Gaussian and Student-t3 noise, keeps
// each pod's newest 64 points as the State does (dropped at a restart, the
// first warmUp after it ignored), cleans them as assess does, and scores every
// evaluation with sustainScore — whether or not the series counts as having
// no sawtooth, which only makes the check stricter. It logs the highest
// score (1 is the bar) and the longest run of evaluations in a row above it,
// and fails if that run is as long as the default ConsecutiveBreaches (3):
// the rule alone would then abort a healthy pod. A single evaluation above
// the bar does occur (2026-11-28, 45 million evaluations: peak 1.05, a
// cache fill at 3 % t3 noise, never two in a row; 0.89 at most in the other
// noise levels), so the margin is thin there.
func TestSustainMargin(t *testing.T) {
	if os.Getenv("PERF_BENCH_FULL") != "1" {
		t.Skip("PERF_BENCH_FULL=1 runs the margin check")
	}
	const (
		pods    = 340 // per pattern and noise level: 3,400 pod-hours
		guarded = 10 * hourS
	)
	type cell struct {
		noise float64
		kind  heapsim.NoiseKind
	}
	var cells []cell
	for _, kind := range []heapsim.NoiseKind{heapsim.Gaussian, heapsim.StudentT3} {
		for _, noise := range []float64{0.003, 0.01, 0.02, 0.03} {
			cells = append(cells, cell{noise, kind})
		}
	}
	type peak struct {
		score           float64
		cell, pat, seed int
		at              float64
		evals, run      int // run: most evaluations in a row above the bar
		hours           float64
	}
	patterns := []string{"flat", "wandering", "steps", "spikes", "cache fills", "restarts", "lost and late scrapes"}
	jobs := make(chan [3]int)
	results := make(chan peak)
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := newWorkspace()
			for j := range jobs {
				c, pat, seed := cells[j[0]], j[1], j[2]
				rng := rand.New(rand.NewPCG(uint64(seed), uint64(1000*j[0]+pat)))
				newPod := func(started float64) *heapsim.Pod {
					p := heapsim.NewGo(rng)
					p.Noise, p.NoiseKind, p.Started = c.noise, c.kind, started
					if started > 0 {
						p.Warm = 120 + 60*rng.Float64()
					}
					return p
				}
				p := newPod(-3600)
				lost, jitter := 0.0, 0.5
				switch patterns[pat] {
				case "wandering":
					period := 1800 + 3600*rng.Float64()
					p.WanderAmp, p.WanderPeriod = math.Min(0.25, mb*period/(2*math.Pi*p.Floor)), period
				case "steps":
					for h := 0.0; h < 11; h++ {
						up := h*hourS + 0.5*hourS*rng.Float64()
						p.Steps = append(p.Steps, heapsim.Step{At: up, Size: (0.1 + 1.8*rng.Float64()) * gb, Until: up + 600 + 1200*rng.Float64()})
					}
				case "spikes":
					p.SpikeP = 0.01
				case "cache fills":
					p.FillEvery, p.FillSize = 1200+1200*rng.Float64(), (0.3+1.6*rng.Float64())*gb
					p.FillRamp, p.FillHold = 15+45*rng.Float64(), 300+600*rng.Float64()
				case "lost and late scrapes":
					lost, jitter = 0.03, 2
				}
				nextRestart := math.Inf(1)
				if patterns[pat] == "restarts" {
					nextRestart = 1200 + hourS*rng.Float64()
				}
				pk := peak{score: math.Inf(-1), cell: j[0], pat: pat, seed: seed}
				var ht, hy []float64
				ignoreUntil, above := 0.0, 0
				for k := 0.0; ; k++ {
					tm := 15*k + jitter*(2*rng.Float64()-1)
					if tm > 1200+guarded {
						break
					}
					if tm >= nextRestart {
						p, ht, hy = newPod(tm), ht[:0], hy[:0]
						ignoreUntil = tm + warmUp.Seconds()
						nextRestart = tm + 2*hourS + 2*hourS*rng.Float64()
					}
					_, ws := p.Sample(tm)
					if rng.Float64() < lost || tm < ignoreUntil {
						continue
					}
					ht, hy = append(ht, tm), append(hy, ws)
					if len(hy) > minPoints { // 15 s samples
						ht, hy = ht[1:], hy[1:]
					}
					if tm < 1200 {
						continue // recorded, not guarded
					}
					w.clean(ht, hy)
					if len(w.cy) < minFloors {
						continue
					}
					pk.evals++
					s, _, _ := sustainScore(w.ct, w.cy, theta100)
					if s > pk.score {
						pk.score, pk.at = s, tm
					}
					if s > 1 {
						above++
						pk.run = max(pk.run, above)
					} else {
						above = 0
					}
				}
				pk.hours = guarded / hourS
				results <- pk
			}
		}()
	}
	go func() {
		for ci := range cells {
			for pat := range patterns {
				for seed := 0; seed < pods; seed++ {
					jobs <- [3]int{ci, pat, seed}
				}
			}
		}
		close(jobs)
		wg.Wait()
		close(results)
	}()
	best := make([]peak, len(cells))
	for i := range best {
		best[i].score = math.Inf(-1)
	}
	var hours float64
	var evals, longest int
	overall := peak{score: math.Inf(-1)}
	for r := range results {
		hours += r.hours
		evals += r.evals
		longest = max(longest, r.run)
		if r.score > best[r.cell].score {
			best[r.cell] = r
		}
		if r.score > overall.score {
			overall = r
		}
	}
	for i, b := range best {
		t.Logf("%.1f%% %-5s highest score %.2f (%s, pod %d, %.0f s)", 100*cells[i].noise, cells[i].kind, b.score, patterns[b.pat], b.seed, b.at)
	}
	t.Logf("%.0f pod-hours, %d evaluations: highest score %.2f of the bar (1), %.1f%% %s, %s; at most %d evaluations in a row above it",
		hours, evals, overall.score, 100*cells[overall.cell].noise, cells[overall.cell].kind, patterns[overall.pat], longest)
	if longest >= 3 {
		t.Errorf("the sustained rise alone was above its bar %d evaluations in a row on a healthy working set: an abort", longest)
	}
}
