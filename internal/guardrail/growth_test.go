package guardrail

import (
	"math"
	"strings"
	"testing"
	"time"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
	"perfexp.dev/perf-operator/internal/metrics"
)

const (
	toggle = 1200.0 // 20 minutes recorded before the toggle
	hourS  = 3600.0
)

// TestGrowthTrips: every kind of runaway growth aborts, in time, with the
// growth reason. Each case runs several seeds (GC phases).
func TestGrowthTrips(t *testing.T) {
	cases := []struct {
		name   string
		setup  func(sc *scenario)
		within float64 // seconds after onset (the toggle)
	}{
		{"seed story +700 MB/min on the sawtooth", func(sc *scenario) {
			sc.gen.leak, sc.gen.onset = 700*mb/60, toggle
		}, 120},
		{"+700 MB/min retained at each GC, teeth unchanged", func(sc *scenario) {
			sc.gen.leak, sc.gen.onset, sc.gen.leakAtGC = 700*mb/60, toggle, true
		}, 420},
		{"+700 MB/min with nothing recorded before the toggle", func(sc *scenario) {
			sc.gen.leak, sc.gen.onset = 700*mb/60, toggle
			sc.toggle = 0
		}, toggle + 540},
		{"+300 MB/min", func(sc *scenario) {
			sc.gen.leak, sc.gen.onset = 300*mb/60, toggle
		}, 900},
		{"working set only (no heap metric), +500 MB/min, no GC sawtooth", func(sc *scenario) {
			sc.gen.flat, sc.heapless = true, true
			sc.gen.leak, sc.gen.onset = 500*mb/60, toggle
		}, 180},
		{"+700 MB/min with 2 % noise", func(sc *scenario) {
			sc.gen.noise = 0.02
			sc.gen.leak, sc.gen.onset = 700*mb/60, toggle
		}, 600},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for seed := uint64(0); seed < 8; seed++ {
				sc := newScenario(seed, toggle, toggle+1800)
				c.setup(sc)
				b, when := sc.play()
				if b == nil || b.Reason != perfv1.ReasonHeapGrowth {
					t.Fatalf("seed %d: breach %+v, want %s", seed, b, perfv1.ReasonHeapGrowth)
				}
				if after := when - toggle; after > c.within {
					t.Errorf("seed %d: aborted %.0f s after onset, want ≤ %.0f s: %s", seed, after, c.within, b.Message)
				}
			}
		})
	}
}

// TestGrowthDoesNotTrip: what must never abort, over two guarded hours and
// several seeds each.
func TestGrowthDoesNotTrip(t *testing.T) {
	cases := []struct {
		name  string
		setup func(sc *scenario)
	}{
		{"healthy sawtooth", func(*scenario) {}},
		{"one-off +1 GB steps, each back down 7 minutes later", func(sc *scenario) {
			for i := 0.0; i < 8; i++ {
				up := toggle + 900*i + 7.5*i // 7.5 s further into the GC cycle each time
				sc.gen.steps[up], sc.gen.steps[up+420] = 1*gb, -1*gb
			}
		}},
		{"a +1 GB step, then back down 20 minutes later", func(sc *scenario) {
			sc.gen.steps[toggle+600] = 1 * gb
			sc.gen.steps[toggle+1800] = -1 * gb
		}},
		{"single-scrape spikes up and down", func(sc *scenario) {
			for i, f := range []float64{1.8, 0.3, 2.0, 0.5, 1.3, 0.2} {
				sc.gen.spikes[int(toggle/15)+10+37*i] = f
			}
		}},
		{"noise 2 %", func(sc *scenario) { sc.gen.noise = 0.02 }},
		{"allocation +5 % at the toggle (not retained)", func(sc *scenario) {
			sc.gen.allocGain, sc.gen.allocAt = 1.05, toggle
		}},
		{"fresh pod warming up from 200 MB", func(sc *scenario) {
			sc.from, sc.gen.started, sc.gen.warm = toggle+30, toggle+30, 170
			sc.started = at(toggle + 30)
		}},
		{"container restart mid-run, warming up again", func(sc *scenario) {
			sc.cfg.MaxRestarts = 5
			sc.before = func(t float64, sc *scenario, _ *State) {
				if t == toggle+1200 {
					sc.gen.started, sc.gen.warm, sc.started, sc.restarts = t, 160, at(t), 1
				}
			}
		}},
		{"load ×2 at a new stage, with Reset", func(sc *scenario) {
			sc.gen.allocGain, sc.gen.allocAt = 2, toggle+1800
			sc.before = func(t float64, _ *scenario, st *State) {
				if t == toggle+1800 {
					st.Reset()
				}
			}
		}},
		{"working set only, flat with noise", func(sc *scenario) {
			sc.gen.flat, sc.heapless, sc.gen.noise = true, true, 0.01
		}},
		{"state round-tripped through JSON after every sample", func(sc *scenario) { sc.roundTrip = true }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for seed := uint64(0); seed < 6; seed++ {
				sc := newScenario(seed, toggle, toggle+2*hourS)
				c.setup(sc)
				if b, when := sc.play(); b != nil {
					t.Fatalf("seed %d: aborted %.0f s after the toggle: %s: %s", seed, when-toggle, b.Reason, b.Message)
				}
			}
		})
	}
}

// TestLongIntervals: with 30 s or 60 s samples a one-minute sawtooth is barely
// resolved or aliased; the rule must stay quiet rather than guess.
func TestLongIntervals(t *testing.T) {
	for _, every := range []float64{20, 30, 45, 60, 90} {
		for seed := uint64(0); seed < 4; seed++ {
			g := newGen(seed)
			cfg := defaultConfig()
			cfg.Interval = time.Duration(every) * time.Second
			var st State
			for k := 0.0; k*every < 4*hourS; k++ {
				s := g.sample("a", k*every, false)
				if b := st.Observe(cfg, []metrics.Sample{s}, nil, limit, s.Time); b != nil {
					t.Fatalf("every %.0f s, seed %d: %s", every, seed, b.Message)
				}
			}
		}
	}
}

// TestLoadChangeWithoutResetTrips shows why Reset exists: a doubled request
// rate doubles the allocation rate, which the teeth cannot tell from a leak.
func TestLoadChangeWithoutResetTrips(t *testing.T) {
	sc := newScenario(1, toggle, toggle+2*hourS)
	sc.gen.allocGain, sc.gen.allocAt = 2, toggle+1800
	if b, _ := sc.play(); b == nil || b.Reason != perfv1.ReasonHeapGrowth {
		t.Fatalf("got %+v, want a growth breach", b)
	}
}

// TestConsecutiveBreaches: a breach needs ConsecutiveBreaches evaluations in a
// row; each extra one costs exactly one sample on a steady leak.
func TestConsecutiveBreaches(t *testing.T) {
	var first float64
	for n := 1; n <= 4; n++ {
		sc := newScenario(3, toggle, toggle+1800)
		sc.gen.leak, sc.gen.onset = 700*mb/60, toggle
		sc.cfg.ConsecutiveBreaches = n
		b, when := sc.play()
		if b == nil {
			t.Fatalf("n=%d: no breach", n)
		}
		if n == 1 {
			first = when
		} else if want := first + 15*float64(n-1); when != want {
			t.Errorf("n=%d: breach at %.0f s, want %.0f s", n, when-toggle, want-toggle)
		}
	}
}

// TestGrowthMessage: the message says what grows, how fast, the limit and when
// the memory limit would be reached.
func TestGrowthMessage(t *testing.T) {
	cfg := defaultConfig()
	v := verdict{breach: true, slope: 712 << 20 / 60.0}
	cases := []struct {
		name, series   string
		floor          bool
		current, limit float64
		want           string
	}{
		{"heap with limit", seriesHeap, false, 5.5 * (1 << 30), 12 << 30,
			"pod web-1: heap +712 MiB/min, limit 100 MiB/min; projected to reach the memory limit (12 GiB) in 9m"},
		{"floor evidence", seriesHeap, true, 11.9 * (1 << 30), 12 << 30,
			"pod web-1: heap +712 MiB/min, limit 100 MiB/min (heap after GC rising); projected to reach the memory limit (12 GiB) in 9s"},
		{"working set, no limit known", seriesWorkingSet, false, 1 << 30, 0,
			"pod web-1: working set +712 MiB/min, limit 100 MiB/min"},
		{"already over", seriesHeap, false, 13 << 30, 12 << 30,
			"pod web-1: heap +712 MiB/min, limit 100 MiB/min; already at the memory limit (12 GiB)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v.floor = c.floor
			if got := growthMessage("web-1", c.series, v, cfg, c.current, c.limit); got != c.want {
				t.Errorf("got  %q\nwant %q", got, c.want)
			}
		})
	}
}

// TestGrowthMessageEndToEnd: the seed story's message carries the numbers.
func TestGrowthMessageEndToEnd(t *testing.T) {
	sc := newScenario(0, toggle, toggle+1800)
	sc.gen.leak, sc.gen.onset = 700*mb/60, toggle
	b, when := sc.play()
	if b == nil {
		t.Fatal("no breach")
	}
	for _, want := range []string{"pod app-0: heap +", " MiB/min, limit 100 MiB/min; projected to reach the memory limit (12 GiB) in "} {
		if !strings.Contains(b.Message, want) {
			t.Errorf("message %q lacks %q", b.Message, want)
		}
	}
	if !b.At.Equal(at(when)) {
		t.Errorf("At = %v, want the sample's time %v", b.At, at(when))
	}
}

// TestMissingSamples: NaN heap values are skipped, not read as zeros; a heap
// that stays missing gives way to the working set.
func TestMissingSamples(t *testing.T) {
	var st State
	cfg := defaultConfig()
	g := newGen(1)
	for i := 0; i < 400; i++ {
		s := g.sample("a", float64(i)*15, false)
		if i%7 == 3 || (i > 200 && i < 260) {
			s.HeapBytes = math.NaN()
		}
		if i%11 == 5 {
			s.WorkingSetBytes = math.NaN()
		}
		if b := st.Observe(cfg, []metrics.Sample{s}, nil, limit, s.Time); b != nil {
			t.Fatalf("sample %d: %s", i, b.Message)
		}
		p := st.Pods[0]
		if i == 255 && p.Series != seriesWorkingSet {
			t.Errorf("after 13 minutes without heap the history should follow the working set, got %q", p.Series)
		}
		if i == 199 && p.Series != seriesHeap {
			t.Errorf("a few missing heap values must not switch the series, got %q", p.Series)
		}
	}
}

// TestHistoryResolution: with a 5 s interval only one point per 15 s enters the
// history, so 64 points still span 16 minutes.
func TestHistoryResolution(t *testing.T) {
	var st State
	cfg := defaultConfig()
	cfg.Interval = 5 * time.Second
	g := newGen(2)
	for i := 0; i < 1000; i++ {
		s := g.sample("a", float64(i)*5, false)
		st.Observe(cfg, []metrics.Sample{s}, nil, limit, s.Time)
	}
	p := st.Pods[0]
	if len(p.V) != maxPoints {
		t.Fatalf("%d points, want %d", len(p.V), maxPoints)
	}
	if span := time.Duration(p.lastTime()-p.T0) * time.Millisecond; span != 63*15*time.Second {
		t.Errorf("history spans %v, want %v", span, 63*15*time.Second)
	}
}
