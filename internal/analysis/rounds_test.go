package analysis

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// interleaved builds R rounds of sub-windows of n samples each from one AR(1)
// stream with a linear drift of driftPerRound (relative) per round: the
// treatment sub-window's values are scaled by 1+effect. Rounds alternate AB,
// BA as the engine's default order does.
func interleaved(seed uint64, rounds, n int, effect, cv, phi, driftPerRound float64) []RoundPair {
	s := ar1(seed, rounds*2*n, 1, cv, phi)
	out := make([]RoundPair, rounds)
	for r := range out {
		for k := 0; k < 2; k++ {
			sub := make(Series, n)
			for i := range sub {
				pos := (r*2+k)*n + i
				sub[i] = s[pos] * (1 + driftPerRound*float64(pos)/float64(2*n))
			}
			treatmentFirst := r%2 == 1
			if (k == 0) == treatmentFirst {
				for i := range sub {
					sub[i] *= 1 + effect
				}
				out[r].Treatment = sub
			} else {
				out[r].Baseline = sub
			}
		}
	}
	return out
}

func TestCompareRoundsRecoversTheEffect(t *testing.T) {
	for _, tc := range []struct {
		name          string
		effect, drift float64
	}{
		{"no drift", 0.16, 0},
		{"drift of 2 % a round", 0.16, 0.02},
		{"A/A under drift", 0, 0.02},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := CompareRounds(interleaved(7, 6, 8, tc.effect, 0.01, 0.5, tc.drift), Options{})
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(res.Overhead-tc.effect) > 0.01 {
				t.Errorf("overhead %.4f, want %.2f ± 0.01", res.Overhead, tc.effect)
			}
			if !(res.CILow <= tc.effect && tc.effect <= res.CIHigh) || !(res.CILow <= res.Overhead && res.Overhead <= res.CIHigh) {
				t.Errorf("interval [%.4f, %.4f] misses the effect %.2f or the estimate %.4f", res.CILow, res.CIHigh, tc.effect, res.Overhead)
			}
			if res.Significant != (tc.effect != 0) {
				t.Errorf("significant %v for effect %.2f: [%.4f, %.4f]", res.Significant, tc.effect, res.CILow, res.CIHigh)
			}
			if res.Rounds != 6 || !(res.MDE > 0 && res.MDE < 0.05) {
				t.Errorf("rounds %d, MDE %.4f", res.Rounds, res.MDE)
			}
		})
	}
}

// TestMDEIsWhatTheDesignDetects checks the MDE's meaning on its own data: an
// effect of MDE is significant in about Power of runs, one of MDE/2 far less.
func TestMDEIsWhatTheDesignDetects(t *testing.T) {
	const runs = 400
	var mdeSum float64
	for i := range runs {
		res, err := CompareRounds(interleaved(uint64(1000+i), 6, 8, 0, 0.02, 0.5, 0), Options{})
		if err != nil {
			t.Fatal(err)
		}
		mdeSum += res.MDE
	}
	m := mdeSum / runs
	power := func(effect float64) float64 {
		hit := 0
		for i := range runs {
			res, err := CompareRounds(interleaved(uint64(5000+i), 6, 8, effect, 0.02, 0.5, 0), Options{})
			if err != nil {
				t.Fatal(err)
			}
			if res.Significant {
				hit++
			}
		}
		return float64(hit) / runs
	}
	// The MDE varies from run to run with the rounds' spread; at the mean MDE
	// the power is near, a little under, the nominal 80 %.
	if p := power(m); p < 0.6 || p > 0.95 {
		t.Errorf("mean MDE %.4f detected in %.2f of runs; want about %.2f", m, p, Power)
	}
	if p := power(m / 3); p > 0.4 {
		t.Errorf("a third of the MDE detected in %.2f of runs", p)
	}
}

func TestCompareRoundsRefusesTooLittle(t *testing.T) {
	good := Series{1, 1.01, 0.99}
	for _, tc := range []struct {
		name   string
		rounds []RoundPair
		want   string
		tooFew bool
	}{
		{"no rounds", nil, "0 of 0 rounds", true},
		{"one usable round", []RoundPair{{good, good}, {good, Series{math.NaN(), math.NaN()}}}, "1 of 2 rounds", true},
		{"infinite sample", []RoundPair{{good, good}, {good, Series{1, math.Inf(1)}}}, "round 2: sample 1 is infinite", false},
		{"zero mean", []RoundPair{{good, good}, {Series{0, 0}, good}}, "round 2: means 0", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := CompareRounds(tc.rounds, Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) || errors.Is(err, errTooFew) != tc.tooFew {
				t.Errorf("error %v; want one containing %q (too few: %v)", err, tc.want, tc.tooFew)
			}
		})
	}
}

// A valid sub-window with a single sample is a replicate like any other: the
// e2e cluster's 20 s sub-windows sampled every 5 s keep two samples after their
// lead-in, and one when the sampling slips, which used to drop the round.
func TestARoundWithOneSampleCounts(t *testing.T) {
	b := Series{1, 1.01, 0.99}
	rounds := []RoundPair{{b, Series{1.2, 1.19}}, {b, Series{math.NaN(), 1.18}}, {b, Series{1.21, 1.2}}}
	res, err := CompareRounds(rounds, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rounds != 3 || !res.Significant || math.Abs(res.Overhead-0.197) > 0.01 {
		t.Errorf("got %d rounds, overhead %.3f [%.3f, %.3f]; want 3 rounds and about +19.7 %%, significant", res.Rounds, res.Overhead, res.CILow, res.CIHigh)
	}
}

func TestShortWindowsStayWithinTheirSpread(t *testing.T) {
	// 16 points each with 1 % noise, a +16.5 % step: the interval may not be
	// wider than the samples allow.
	b := ar1(3, 16, 0.255, 0.01, 0.2)
	tr := ar1(4, 16, 0.297, 0.01, 0.2)
	res, err := Compare(b, tr, fastOptions())
	if err != nil {
		t.Fatal(err)
	}
	bl, bh := minMax(b)
	tl, th := minMax(tr)
	if res.CILow < tl/bh-1-1e-12 || res.CIHigh > th/bl-1+1e-12 {
		t.Errorf("interval [%.4f, %.4f] wider than the spread allows [%.4f, %.4f]", res.CILow, res.CIHigh, tl/bh-1, th/bl-1)
	}
	if w := res.CIHigh - res.CILow; w > 0.08 {
		t.Errorf("interval %.1f points wide for a step seen by eye", w*100)
	}
	if !res.Significant || res.MDE <= 0 {
		t.Errorf("significant %v, MDE %.4f", res.Significant, res.MDE)
	}
}

func TestCompareRoundValues(t *testing.T) {
	// p99 per sub-window: 10 ms ± noise at baseline, +20 % with the toggle.
	rounds := [][2]float64{{10.2, 12.1}, {9.8, 11.9}, {10.1, 12.2}, {9.9, 11.8}, {0, 12}, {10, math.Inf(1)}}
	res, err := CompareRoundValues(rounds, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rounds != 4 || math.Abs(res.Overhead-0.2) > 0.01 || !res.Significant || !(res.CILow < 0.2 && 0.2 < res.CIHigh) || res.MDE <= 0 {
		t.Errorf("%+v", res)
	}
	if _, err := CompareRoundValues([][2]float64{{10, 12}}, Options{}); !errors.Is(err, errTooFew) {
		t.Errorf("one round: %v", err)
	}
}
