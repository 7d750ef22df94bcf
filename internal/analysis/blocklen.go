package analysis

import "math"

// autocov returns the sample autocovariances γ̂(0..maxLag) of x around its mean,
// with the usual 1/n divisor (which keeps the sequence positive semi-definite).
func autocov(x []float64, maxLag int) []float64 {
	n := len(x)
	m := mean(x)
	out := make([]float64, maxLag+1)
	for k := 0; k <= maxLag && k < n; k++ {
		s := 0.0
		for t := 0; t+k < n; t++ {
			s += (x[t] - m) * (x[t+k] - m)
		}
		out[k] = s / float64(n)
	}
	return out
}

// politisWhite returns the circular block bootstrap's block length for x, from
// Politis & White (2004) as corrected by Patton, Politis & White (2009):
//
//	ℓ = (2Ĝ² / D̂)^(1/3) · n^(1/3),  Ĝ = Σ λ(k/M)|k|γ̂(k),  D̂ = 4/3 · (Σ λ(k/M)γ̂(k))²
//
// with λ the flat-top (trapezoidal) lag window and M twice the first lag after
// which K_n autocorrelations in a row are insignificant. It balances the block
// bootstrap variance's bias (short blocks cut correlation) against its variance
// (long blocks are few), and it is data-driven: white noise gets 1, AR(0.8)
// about n^(1/3)·3. The result is clamped to [1, min(3√n, n/3)], the upper bound
// the authors recommend so that a window still holds several blocks.
func politisWhite(x []float64) int {
	n := len(x)
	fn := float64(n)
	kn := max(5, int(math.Ceil(math.Sqrt(math.Log10(fn)))))
	mmax := min(int(math.Ceil(math.Sqrt(fn)))+kn, n-1)
	g := autocov(x, mmax)
	if g[0] <= 0 {
		return 1
	}
	// Lag after which the correlation is indistinguishable from 0 for kn lags
	// in a row (c = 2 in the authors' notation).
	thr := 2 * math.Sqrt(math.Log10(fn)/fn)
	mhat := mmax
	for m := 0; m+kn <= mmax; m++ {
		if quietAfter(g, m, kn, thr) {
			mhat = m
			break
		}
	}
	bigM := min(2*mhat, mmax)
	gSum, gBar := g[0], 0.0
	for k := 1; k <= bigM; k++ {
		lam := flatTop(float64(k) / float64(bigM))
		gSum += 2 * lam * g[k]
		gBar += 2 * lam * float64(k) * g[k]
	}
	d := 4.0 / 3.0 * gSum * gSum
	upper := math.Max(1, math.Floor(math.Min(3*math.Sqrt(fn), fn/3)))
	if d <= 0 || gBar == 0 {
		return 1
	}
	l := math.Cbrt(2*gBar*gBar/d) * math.Cbrt(fn)
	return int(math.Ceil(math.Min(math.Max(l, 1), upper)))
}

// quietAfter reports whether the autocorrelations at lags m+1 … m+kn are all
// below thr.
func quietAfter(g []float64, m, kn int, thr float64) bool {
	for k := 1; k <= kn; k++ {
		if math.Abs(g[m+k]/g[0]) >= thr {
			return false
		}
	}
	return true
}

// flatTop is the trapezoidal lag window: 1 up to half the bandwidth, then a
// linear fall to 0. Its flat top leaves low lags unbiased.
func flatTop(t float64) float64 {
	t = math.Abs(t)
	switch {
	case t <= 0.5:
		return 1
	case t <= 1:
		return 2 * (1 - t)
	}
	return 0
}
