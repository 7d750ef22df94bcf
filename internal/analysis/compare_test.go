package analysis

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// ar1 is a stationary AR(1) series around mean with marginal coefficient of
// variation cv.
func ar1(seed uint64, n int, mean, cv, phi float64) Series {
	r := rand.New(rand.NewPCG(seed, 1))
	a := r.NormFloat64() * cv
	sd := cv * math.Sqrt(1-phi*phi)
	out := make(Series, n)
	for i := range out {
		a = phi*a + sd*r.NormFloat64()
		out[i] = mean * (1 + a)
	}
	return out
}

func fastOptions() Options {
	o := DefaultOptions()
	o.Resamples = 499
	return o
}

func TestCompareKnownCase(t *testing.T) {
	// Treatment is the baseline's twin ×1.041 plus a little noise: the point
	// estimate must recover +4.1 % and the interval must contain it.
	base := ar1(1, 120, 0.8, 0.05, 0.8)
	r := rand.New(rand.NewPCG(2, 2))
	treat := make(Series, len(base))
	for i, v := range base {
		treat[i] = v*1.041 + 0.002*r.NormFloat64()
	}
	res, err := Compare(base, treat, fastOptions())
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(res.Overhead-0.041) > 0.001 {
		t.Errorf("overhead %.4f, want ≈ 0.041", res.Overhead)
	}
	if !(res.CILow < 0.041 && 0.041 < res.CIHigh) {
		t.Errorf("CI [%.4f, %.4f] misses 0.041", res.CILow, res.CIHigh)
	}
	if res.N != [2]int{120, 120} || res.BlockLen < 1 {
		t.Errorf("N %v, block %d", res.N, res.BlockLen)
	}
	if math.Abs(res.Delta-(res.Treatment-res.Baseline)) > 1e-12 {
		t.Errorf("delta %g ≠ %g − %g", res.Delta, res.Treatment, res.Baseline)
	}
}

func TestCompareSignificance(t *testing.T) {
	for _, tc := range []struct {
		name   string
		effect float64
		cv     float64
		want   bool
	}{
		{"large effect, low noise", 0.10, 0.01, true},
		{"no effect", 0, 0.05, false},
		{"small effect, high noise", 0.01, 0.10, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := ar1(10, 120, 0.8, tc.cv, 0.5)
			tr := ar1(11, 120, 0.8*(1+tc.effect), tc.cv, 0.5)
			res, err := Compare(b, tr, fastOptions())
			if err != nil {
				t.Fatal(err)
			}
			if res.Significant != tc.want {
				t.Errorf("significant=%v, want %v (overhead %.4f CI [%.4f, %.4f])",
					res.Significant, tc.want, res.Overhead, res.CILow, res.CIHigh)
			}
			if !(res.CILow <= res.Overhead && res.Overhead <= res.CIHigh) {
				t.Errorf("point %.4f outside its CI [%.4f, %.4f]", res.Overhead, res.CILow, res.CIHigh)
			}
		})
	}
}

func TestCompareDeterministic(t *testing.T) {
	b, tr := ar1(3, 60, 1, 0.05, 0.8), ar1(4, 60, 1.03, 0.05, 0.8)
	o := fastOptions()
	r1, _ := Compare(b, tr, o)
	r2, _ := Compare(b, tr, o)
	if r1 != r2 {
		t.Errorf("same seed, different results: %+v vs %+v", r1, r2)
	}
	o.Seed++
	r3, _ := Compare(b, tr, o)
	if r3.CILow == r1.CILow && r3.CIHigh == r1.CIHigh {
		t.Errorf("a different seed gave the identical interval")
	}
	if r3.Overhead != r1.Overhead {
		t.Errorf("the point estimate must not depend on the seed")
	}
}

func TestCompareErrors(t *testing.T) {
	good := ar1(5, 40, 1, 0.05, 0.5)
	nan := math.NaN()
	for _, tc := range []struct {
		name    string
		b, t    Series
		o       Options
		want    string
		tooFew  bool
		wantErr bool
	}{
		{name: "empty baseline", b: nil, t: good, want: "baseline: too few samples: 0", tooFew: true},
		{name: "short treatment", b: good, t: Series{1, 2, 3}, want: "treatment: too few samples: 3", tooFew: true},
		{name: "all NaN", b: Series{nan, nan, nan, nan, nan}, t: good, want: "baseline: too few samples: 0", tooFew: true},
		{name: "infinite sample", b: good, t: append(Series{math.Inf(1)}, good...), want: "treatment: sample 0 is infinite"},
		{name: "zero baseline", b: Series{0, 0, 0, 0, 0}, t: good, want: "baseline mean is 0"},
		{name: "negative treatment", b: good, t: Series{-1, -1, -1, -1}, want: "treatment mean is -1"},
		{name: "few resamples", b: good, t: good, o: Options{Resamples: 10}, want: "10 resamples"},
		{name: "confidence", b: good, t: good, o: Options{Confidence: 1.5}, want: "confidence 1.5"},
		{name: "block", b: good, t: good, o: Options{BlockLen: -2}, want: "block length -2"},
		{name: "method", b: good, t: good, o: Options{Interval: "bca"}, want: `unknown interval method "bca"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Compare(tc.b, tc.t, tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want it to contain %q", err, tc.want)
			}
			if errors.Is(err, errTooFew) != tc.tooFew {
				t.Errorf("errors.Is(errTooFew) = %v", !tc.tooFew)
			}
		})
	}
}

func TestCompareDropsNaN(t *testing.T) {
	b, tr := ar1(6, 50, 1, 0.05, 0.6), ar1(7, 50, 1.05, 0.05, 0.6)
	holey := append(Series{math.NaN()}, b...)
	holey = append(holey, math.NaN())
	r1, err := Compare(holey, tr, fastOptions())
	if err != nil {
		t.Fatal(err)
	}
	r2, _ := Compare(b, tr, fastOptions())
	if r1 != r2 || r1.N != [2]int{50, 50} {
		t.Errorf("NaNs changed the result: %+v vs %+v", r1, r2)
	}
}

func TestCompareConstantWindows(t *testing.T) {
	for _, tc := range []struct {
		b, t     float64
		overhead float64
		sig      bool
	}{{2, 2, 0, false}, {2, 2.1, 0.05, true}} {
		b := Series{tc.b, tc.b, tc.b, tc.b, tc.b}
		tr := Series{tc.t, tc.t, tc.t, tc.t, tc.t}
		res, err := Compare(b, tr, fastOptions())
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(res.Overhead-tc.overhead) > 1e-12 || res.CILow != res.Overhead || res.CIHigh != res.Overhead || res.Significant != tc.sig {
			t.Errorf("%v→%v: %+v", tc.b, tc.t, res)
		}
	}
}

func TestCompareIntervalMethods(t *testing.T) {
	// On autocorrelated data the i.i.d. bootstrap is much narrower than the
	// block percentile interval, itself narrower than the studentized one.
	b, tr := ar1(8, 120, 0.8, 0.05, 0.85), ar1(9, 120, 0.8, 0.05, 0.85)
	width := func(o Options) float64 {
		res, err := Compare(b, tr, o)
		if err != nil {
			t.Fatal(err)
		}
		return res.CIHigh - res.CILow
	}
	o := fastOptions()
	stud := width(o)
	o.Interval = IntervalPercentile
	block := width(o)
	o.BlockLen = 1
	iid := width(o)
	if !(iid < block && block < stud) {
		t.Errorf("widths iid %.4f, block %.4f, studentized %.4f: want increasing", iid, block, stud)
	}
}

func TestCompareLatency(t *testing.T) {
	for _, tc := range []struct {
		b, t, overhead, delta float64
	}{
		{10, 10.1, 0.01, 0.1},
		{20, 15, -0.25, -5},
		{0, 5, 0, 5},
		{10, math.NaN(), 0, 0},
	} {
		r := CompareLatency(tc.b, tc.t)
		if math.Abs(r.Overhead-tc.overhead) > 1e-12 || math.Abs(r.Delta-tc.delta) > 1e-12 ||
			r.CILow != r.Overhead || r.CIHigh != r.Overhead || r.Significant {
			t.Errorf("CompareLatency(%v, %v) = %+v", tc.b, tc.t, r)
		}
	}
}

func BenchmarkCompareUnit(b *testing.B) {
	base, treat := ar1(1, 120, 0.8, 0.05, 0.8), ar1(2, 120, 0.83, 0.05, 0.8)
	o := DefaultOptions()
	for b.Loop() {
		if _, err := Compare(base, treat, o); err != nil {
			b.Fatal(err)
		}
	}
}
