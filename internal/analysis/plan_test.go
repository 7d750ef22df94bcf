package analysis

import (
	"math"
	"testing"
	"time"
)

func TestPlanScalesTheMDE(t *testing.T) {
	// Four times the window halves the MDE (on the log scale).
	if got := MDEForWindows(0.10, 30*time.Minute, 2*time.Hour); math.Abs(math.Log1p(got)-math.Log1p(0.10)/2) > 1e-12 {
		t.Errorf("MDEForWindows ×4 = %.4f", got)
	}
	if got := WindowsFor(0.10, 30*time.Minute, 0.05); got < 115*time.Minute || got > 125*time.Minute {
		t.Errorf("WindowsFor(10 %% → 5 %%) = %s; want about 2h", got)
	}
	if got := MDEForRounds(0.04, 4, 4); math.Abs(got-0.04) > 1e-12 {
		t.Errorf("same rounds, MDE %.4f", got)
	}
	if a, b := MDEForRounds(0.04, 4, 8), MDEForRounds(0.04, 4, 16); !(b < a && a < 0.04) {
		t.Errorf("more rounds must lower the MDE: 8 → %.4f, 16 → %.4f", a, b)
	}
	r := RoundsFor(0.04, 4, 0.02)
	if r <= 4 || MDEForRounds(0.04, 4, r) > 0.02 || MDEForRounds(0.04, 4, r-1) <= 0.02 {
		t.Errorf("RoundsFor(4 %% → 2 %%) = %d", r)
	}
	if RoundsFor(0.5, 2, 0.001) != 0 {
		t.Error("an unreachable effect must give 0 rounds")
	}
	// The planned rounds deliver on simulated data: the MDE measured at the
	// planned count is near the target.
	var measured float64
	const runs = 200
	for i := range runs {
		res, err := CompareRounds(interleaved(uint64(9000+i), r, 8, 0, 0.02, 0.5, 0), Options{})
		if err != nil {
			t.Fatal(err)
		}
		measured += res.MDE / runs
	}
	var base float64
	for i := range runs {
		res, err := CompareRounds(interleaved(uint64(19000+i), 4, 8, 0, 0.02, 0.5, 0), Options{})
		if err != nil {
			t.Fatal(err)
		}
		base += res.MDE / runs
	}
	if want := MDEForRounds(base, 4, r); math.Abs(measured-want) > 0.25*want {
		t.Errorf("at %d rounds the MDE is %.4f; the plan from 4 rounds (%.4f) said %.4f", r, measured, base, want)
	}
}
