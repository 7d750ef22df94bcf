package guardrail

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestMedianMatchesSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	for n := 1; n < 300; n++ {
		x := make([]float64, n)
		for i := range x {
			x[i] = math.Round(rng.NormFloat64() * 4) // many ties
		}
		s := slices.Sorted(slices.Values(x))
		want := s[n/2]
		if n%2 == 0 {
			want = (s[n/2-1] + s[n/2]) / 2
		}
		if got := median(x); got != want {
			t.Fatalf("n=%d: median %v, want %v", n, got, want)
		}
	}
	if !math.IsNaN(median(nil)) {
		t.Error("median of nothing should be NaN")
	}
}

func TestTheilSen(t *testing.T) {
	tt := []float64{0, 15, 30, 45, 60, 75, 90, 105}
	y := []float64{10, 25, 40, 1000, 70, 85, 100, 115} // slope 1, one outlier
	if s, n := theilSen(tt, y, nil, nil); s != 1 || n != 28 {
		t.Errorf("slope %v over %d pairs, want 1 over 28", s, n)
	}
	// Two cycles of a sawtooth: within each the slope is 2; across, the drop.
	saw := []float64{0, 30, 60, 90, 5, 35, 65, 95}
	if s, _ := theilSen(tt, saw, nil, nil); s == 2 {
		t.Error("plain Theil–Sen should not see through the sawtooth")
	}
	if s, n := theilSen(tt, saw, []int32{0, 0, 0, 0, 1, 1, 1, 1}, nil); s != 2 || n != 12 {
		t.Errorf("seasonal slope %v over %d pairs, want 2 over 12", s, n)
	}
}

func TestMannKendall(t *testing.T) {
	inc := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	cases := []struct {
		name string
		y    []float64
		want float64
	}{
		// S = 45, Var = 10·9·25/18 = 125, z = 44/√125 = 3.9355.
		{"increasing", inc, 4.150e-5},
		// S = 5, Var = (4·3·13 − 2·1·9)/18 = 7.667, z = 4/√7.667 = 1.4446.
		{"ties", []float64{1, 2, 2, 3}, 0.07428},
		{"constant", []float64{5, 5, 5, 5, 5}, 1},
		{"decreasing", []float64{5, 4, 3, 2, 1}, 1},
		{"too short", []float64{1, 2}, 1},
	}
	for _, c := range cases {
		if got := mannKendallP(c.y, nil); math.Abs(got-c.want) > 1e-3*c.want {
			t.Errorf("%s: p = %.5g, want %.5g", c.name, got, c.want)
		}
	}
}

// TestClean: single-scrape spikes go, GC troughs and peaks stay.
func TestClean(t *testing.T) {
	tt := make([]float64, 12)
	for i := range tt {
		tt[i] = float64(i) * 15
	}
	// 1.2 → 3.9 GB sawtooth, four samples a cycle.
	saw := []float64{1.2, 1.875, 2.55, 3.225, 1.2, 1.875, 2.55, 3.225, 1.2, 1.875, 2.55, 3.225}
	cases := []struct {
		name  string
		at    int
		value float64
		gone  bool
	}{
		{"no spike", -1, 0, false},
		{"up spike on the ramp", 6, 4.8, true},
		{"down spike on the ramp", 6, 0.6, true},
		{"up spike before a GC", 3, 5.5, true},
		{"trough lowered by a bad scrape", 4, 0.3, true},
	}
	for _, c := range cases {
		y := slices.Clone(saw)
		if c.at >= 0 {
			y[c.at] = c.value
		}
		w := newWorkspace()
		w.clean(tt, y)
		wantLen := len(y)
		if c.gone {
			wantLen--
		}
		if len(w.cy) != wantLen || (c.gone && slices.Contains(w.cy, c.value)) {
			t.Errorf("%s: kept %v", c.name, w.cy)
		}
	}
}
