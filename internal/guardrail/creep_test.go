package guardrail

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestCreep: the band of reference floors follows a consistent creep, at
// most at the growth limit. The floors spread over the sampling phase
// (uniformly over 675 MB, the seed story's GC drifting against 15 s samples),
// 16 of them a minute apart; over 200 seeds per case: flat floors creep in
// about the test's 5 % of them, falling ones never, floors creeping 30 MB/min
// (an old generation filling) mostly, at about their rate, and a leak's at the
// limit.
func TestCreep(t *testing.T) {
	theta := float64(100<<20) / 60
	cases := []struct {
		name      string
		perMinute float64 // the floors' true rate, bytes per minute
		// found: how many of 200 get a creep; median: of those found, MB/min.
		foundLo, foundHi   int
		medianLo, medianHi float64
	}{
		{"flat", 0, 0, 20, 0, 100},
		{"falling 30 MB/min", -30 * mb, 0, 0, 0, 0},
		{"creeping 30 MB/min", 30 * mb, 140, 200, 25, 40},
		{"rising 700 MB/min: capped at the limit", 700 * mb, 200, 200, 104.8, 104.9},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var found []float64
			for seed := uint64(0); seed < 200; seed++ {
				rng := rand.New(rand.NewPCG(seed, 3))
				var w workspace
				var ft, fy []float64
				for i := 0; i < 16; i++ {
					ts := 60 * float64(i)
					ft = append(ft, ts)
					fy = append(fy, 1.5*gb+c.perMinute*ts/60+675*mb*rng.Float64())
				}
				if got := w.creep(ft, fy, theta); got > 0 {
					if got > theta {
						t.Fatalf("seed %d: creep %.1f MB/min above the limit", seed, got*60/mb)
					}
					found = append(found, got*60/mb)
				}
			}
			t.Logf("creep found in %d of 200", len(found))
			if len(found) < c.foundLo || len(found) > c.foundHi {
				t.Errorf("creep found in %d of 200, want %d–%d", len(found), c.foundLo, c.foundHi)
			}
			if len(found) > 0 {
				slices.Sort(found)
				m := found[len(found)/2]
				t.Logf("median %.1f MB/min", m)
				if m < c.medianLo || m > c.medianHi {
					t.Errorf("median creep %.1f MB/min, want %.1f–%.1f", m, c.medianLo, c.medianHi)
				}
			}
		})
	}
}
