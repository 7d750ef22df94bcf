package analysis

import (
	"math"
	"time"

	"gonum.org/v1/gonum/stat/distuv"
)

// Planning scales a finished run's minimum detectable effect (Result.MDE) to
// another length. A window mean's standard error falls as 1/√length for the
// sequential design; an interleaved stage's interval is (t(R−1, 97.5 %) +
// t(R−1, Power))·s/√R, with s the spread of its rounds, which another number
// of rounds leaves as it is. Both assume the noise stays what it was, which an
// A/A run is the way to learn.

// MDEForWindows is the minimum detectable effect of sequential windows of
// length w, from a run whose windows of length w0 gave mde0.
func MDEForWindows(mde0 float64, w0, w time.Duration) float64 {
	if mde0 <= 0 || w0 <= 0 || w <= 0 {
		return 0
	}
	return math.Expm1(math.Log1p(mde0) * math.Sqrt(w0.Seconds()/w.Seconds()))
}

// WindowsFor is the window length that detects effect, from a run whose
// windows of length w0 gave mde0, rounded up to a minute.
func WindowsFor(mde0 float64, w0 time.Duration, effect float64) time.Duration {
	if mde0 <= 0 || effect <= 0 {
		return 0
	}
	ratio := math.Log1p(mde0) / math.Log1p(effect)
	w := time.Duration(float64(w0) * ratio * ratio)
	return (w + time.Minute - 1).Truncate(time.Minute)
}

// roundsFactor is (t(R−1, 97.5 %) + t(R−1, Power)) / √R.
func roundsFactor(r int) float64 {
	t := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(r - 1)}
	return (t.Quantile(0.975) + t.Quantile(Power)) / math.Sqrt(float64(r))
}

// MDEForRounds is the minimum detectable effect of r rounds, from a run whose
// r0 rounds gave mde0.
func MDEForRounds(mde0 float64, r0, r int) float64 {
	if mde0 <= 0 || r0 < 2 || r < 2 {
		return 0
	}
	return math.Expm1(math.Log1p(mde0) * roundsFactor(r) / roundsFactor(r0))
}

// MaxPlannedRounds bounds RoundsFor (spec.interleaving.rounds allows 50).
const MaxPlannedRounds = 50

// RoundsFor is the fewest rounds that detect effect, from a run whose r0
// rounds gave mde0; 0 when even MaxPlannedRounds cannot.
func RoundsFor(mde0 float64, r0 int, effect float64) int {
	if mde0 <= 0 || r0 < 2 || effect <= 0 {
		return 0
	}
	for r := 2; r <= MaxPlannedRounds; r++ {
		if MDEForRounds(mde0, r0, r) <= effect {
			return r
		}
	}
	return 0
}
