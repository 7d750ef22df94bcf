package analysis

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestPolitisWhite(t *testing.T) {
	for _, tc := range []struct {
		name     string
		x        []float64
		min, max int
	}{
		{"white noise", ar1(1, 240, 1, 0.05, 0), 1, 3},
		{"AR 0.5", ar1(2, 240, 1, 0.05, 0.5), 2, 12},
		{"AR 0.85", ar1(3, 120, 1, 0.05, 0.85), 5, 33},
		{"constant", []float64{3, 3, 3, 3, 3, 3}, 1, 1},
		{"tiny", []float64{1, 2, 1, 2}, 1, 1},
		{"trend gets long blocks, at most n/3", trend(60), 10, 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if l := politisWhite(tc.x); l < tc.min || l > tc.max {
				t.Errorf("block length %d, want %d–%d", l, tc.min, tc.max)
			}
		})
	}
}

func trend(n int) []float64 {
	x := make([]float64, n)
	for i := range x {
		x[i] = 1 + float64(i)
	}
	return x
}

func TestFitAR(t *testing.T) {
	alt := make([]float64, 100)
	for i := range alt {
		alt[i] = 1 + 0.1*float64(i%2*2-1)
	}
	for _, tc := range []struct {
		name     string
		x        []float64
		min, max float64
	}{
		// Bias correction plus the upper bound put φ above the truth, by
		// about (1+3φ)/n + 1.645·√((1−φ²)/n).
		{"white noise", ar1(1, 240, 1, 0.05, 0), 0, 0.2},
		{"AR 0.8", ar1(2, 240, 1, 0.05, 0.8), 0.8, 0.95},
		{"AR 0.97", ar1(3, 240, 1, 0.05, 0.97), 0.9, phiMax},
		{"a trend is capped", trend(60), phiMax, phiMax},
		{"alternating is clamped to 0", alt, 0, 0},
		{"constant", []float64{2, 2, 2, 2}, 0, 0.98},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := fitAR(tc.x, 0)
			if w.phi < tc.min || w.phi > tc.max {
				t.Errorf("phi %.3f, want %.3f–%.3f", w.phi, tc.min, tc.max)
			}
			if math.Abs(mean(w.res)) > 1e-12 {
				t.Errorf("residuals not centred: %g", mean(w.res))
			}
		})
	}
}

func TestPostBlackeningInvertsPrewhitening(t *testing.T) {
	// With one block covering the window starting at 0 the resample is the
	// window itself, up to the constant the residual centring removed.
	x := ar1(4, 50, 1, 0.05, 0.7)
	w := fitAR(x, 0)
	raw := make([]float64, len(x))
	raw[0] = (x[0] - w.mean) / w.startScale
	for i := 1; i < len(x); i++ {
		raw[i] = (x[i] - w.mean) - w.phi*(x[i-1]-w.mean)
	}
	shift := raw[1] - w.res[1]
	y := raw[0] * w.startScale
	for i := 1; i < len(x); i++ {
		y = w.phi*y + w.res[i] + shift
		if math.Abs(w.mean+y-x[i]) > 1e-9 {
			t.Fatalf("sample %d: rebuilt %.6f, want %.6f", i, w.mean+y, x[i])
		}
	}
}

func TestCircularBlocks(t *testing.T) {
	x := []float64{0, 1, 2, 3, 4, 5, 6}
	out := make([]float64, 20)
	circularBlocks(rand.New(rand.NewPCG(1, 1)), x, 3, out)
	// Within each block of 3 consecutive outputs, values step by 1 mod 7.
	for i := 0; i < len(out); i += 3 {
		for j := i + 1; j < min(i+3, len(out)); j++ {
			if int(out[j]) != (int(out[j-1])+1)%7 {
				t.Fatalf("block at %d not contiguous: %v", i, out)
			}
		}
	}
}

func TestMeanKVB(t *testing.T) {
	// The partial-sum formula equals the Bartlett long-run variance with
	// bandwidth n, Σ_{|k|<n} (1 − |k|/n) γ̂(k), divided by n.
	x := ar1(5, 37, 3, 0.1, 0.6)
	n := len(x)
	g := autocov(x, n-1)
	lr := g[0]
	for k := 1; k < n; k++ {
		lr += 2 * (1 - float64(k)/float64(n)) * g[k]
	}
	m, v := meanKVB(x)
	if math.Abs(m-mean(x)) > 1e-12 || math.Abs(v-lr/float64(n)) > 1e-12*math.Abs(v) {
		t.Errorf("meanKVB = %g, %g; want %g, %g", m, v, mean(x), lr/float64(n))
	}
}

func TestStudentStatDegenerate(t *testing.T) {
	pos := []float64{1, 2, 1, 2}
	if s := studentStat([]float64{0, 0, 0, 0}, pos, 0); !math.IsInf(s, 1) {
		t.Errorf("non-positive mean: %g, want +Inf", s)
	}
	c := []float64{2, 2, 2, 2}
	if s := studentStat(c, c, 0); s != 0 {
		t.Errorf("constant equal: %g, want 0", s)
	}
	if s := studentStat(c, c, 0.1); !math.IsInf(s, 1) {
		t.Errorf("constant unequal: %g, want +Inf", s)
	}
}
