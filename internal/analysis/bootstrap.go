package analysis

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"

	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"
)

const (
	// phiMax caps the prewhitening coefficient: beyond 0.98 (correlation time
	// ≈ 99 samples, 25 min at 15 s) a window cannot separate its level from the
	// mean, and (1−φ²)^(-1/2) would blow up.
	phiMax = 0.98
	// phiUpperLevel is the one-sided level of the AR coefficient's upper bound.
	phiUpperLevel = 0.95
	// streamID separates Compare's random stream from other users of the seed.
	streamID = 0x5eed_a11a
)

// interval is a confidence interval on the overhead and the block length used.
type interval struct {
	lo, hi float64
	block  int
	// crit is the critical value c of est ± c·se (for the minimum detectable
	// effect); 0 when the interval is not of that form.
	crit float64
}

// arWindow is one window prepared for post-blackened resampling: its mean, the
// AR(1) coefficient used to prewhiten it and the centred residuals, which the
// circular blocks resample.
type arWindow struct {
	mean, phi float64
	// startScale is 1/√(1−φ²): the Prais–Winsten first residual e₀ = y₀·√(1−φ²)
	// makes y₀ = e₀·startScale a stationary start, so no burn-in is needed.
	startScale float64
	res        []float64
	block      int
}

// fitAR prewhitens x with a conservative AR(1) coefficient: the lag-1
// autocorrelation, Kendall's bias correction +(1+3φ̂)/n (the sample coefficient
// of a short, demeaned series is biased towards 0), then its one-sided upper
// confidence bound with the asymptotic standard error √((1−φ²)/n). blockLen 0
// picks the residuals' block length with politisWhite.
func fitAR(x []float64, blockLen int) arWindow {
	n := len(x)
	m := mean(x)
	g := autocov(x, 1)
	phi := 0.0
	if g[0] > 0 {
		phi = g[1] / g[0]
	}
	phi += (1 + 3*phi) / float64(n)
	z := distuv.UnitNormal.Quantile(phiUpperLevel)
	phi += z * math.Sqrt(math.Max(0, 1-phi*phi)/float64(n))
	// Negative correlation narrows the true interval; prewhitening it away
	// would only add noise, so the blocks alone handle it.
	phi = math.Min(math.Max(phi, 0), phiMax)
	w := arWindow{mean: m, phi: phi, startScale: 1 / math.Sqrt(1-phi*phi), res: make([]float64, n)}
	w.res[0] = (x[0] - m) / w.startScale
	for t := 1; t < n; t++ {
		w.res[t] = (x[t] - m) - phi*(x[t-1]-m)
	}
	rm := mean(w.res)
	for t := range w.res {
		w.res[t] -= rm // centred, so every resampled series has mean m in expectation
	}
	w.block = blockLen
	if w.block == 0 {
		w.block = politisWhite(w.res)
	}
	w.block = min(w.block, n)
	return w
}

// draw fills out (len n) with one resampled series: circular blocks of
// residuals, filtered back through the AR(1).
func (w *arWindow) draw(r *rand.Rand, out []float64) {
	circularBlocks(r, w.res, w.block, out)
	y := out[0] * w.startScale
	out[0] = w.mean + y
	for t := 1; t < len(out); t++ {
		y = w.phi*y + out[t]
		out[t] = w.mean + y
	}
}

// circularBlocks fills out with blocks of length l starting at uniform
// positions of x, wrapping around its end. Wrapping gives every sample the same
// weight, so the resampled mean is unbiased for the window mean (the moving
// block bootstrap under-weights the window's ends).
func circularBlocks(r *rand.Rand, x []float64, l int, out []float64) {
	n := len(x)
	for i := 0; i < len(out); {
		k := r.IntN(n)
		for end := min(i+l, len(out)); i < end; i++ {
			out[i] = x[k]
			if k++; k == n { // no modulo: it dominated the cost
				k = 0
			}
		}
	}
}

// meanKVB returns x's mean and the KVB variance of that mean, 2 n⁻³ Σ S_t² with
// S_t the partial sums of the demeaned series: the Bartlett long-run variance
// at bandwidth n, in one pass after the mean.
func meanKVB(x []float64) (m, v float64) {
	m = mean(x)
	s, acc := 0.0, 0.0
	for _, xi := range x {
		s += xi - m
		acc += s * s
	}
	n := float64(len(x))
	return m, 2 * acc / (n * n * n)
}

// logRatioSE is the standard error of log(t̄/b̄) from the two KVB variances.
func logRatioSE(bm, bv, tm, tv float64) float64 {
	return math.Sqrt(bv/(bm*bm) + tv/(tm*tm))
}

var errTooVariable = errors.New("samples vary too much for an interval: more than 1 resample in 20 has a non-positive mean")

// studentizedInterval is the default interval (package documentation, steps
// 1–6): the Confidence quantile c of |T*| = |log(t̄*/b̄*) − log(t̄/b̄)| / se*,
// then log(t̄/b̄) ± c·se.
func studentizedInterval(b, t []float64, o Options) (interval, error) {
	bm, bv := meanKVB(b)
	tm, tv := meanKVB(t)
	est := math.Log(tm / bm)
	se := logRatioSE(bm, bv, tm, tv)
	wb, wt := fitAR(b, o.BlockLen), fitAR(t, o.BlockLen)
	iv := interval{block: max(wb.block, wt.block)}
	if se == 0 {
		// Both windows are constant: the difference is exact.
		iv.lo, iv.hi = tm/bm-1, tm/bm-1
		return iv, nil
	}
	r := rand.New(rand.NewPCG(o.Seed, streamID))
	bs, ts := make([]float64, len(b)), make([]float64, len(t))
	stats := make([]float64, o.Resamples)
	for i := range stats {
		wb.draw(r, bs)
		wt.draw(r, ts)
		stats[i] = studentStat(bs, ts, est)
	}
	slices.Sort(stats)
	c := stat.Quantile(o.Confidence, stat.Empirical, stats, nil)
	if math.IsInf(c, 0) {
		return iv, errTooVariable
	}
	iv.lo, iv.hi, iv.crit = math.Expm1(est-c*se), math.Expm1(est+c*se), c
	if math.IsInf(iv.hi, 0) { // status JSON cannot carry an infinity
		return iv, errTooVariable
	}
	return iv, nil
}

// studentStat is |T*| for one resample. A non-positive resampled mean has no
// log; it counts as an extreme resample (+Inf), which is conservative.
func studentStat(bs, ts []float64, est float64) float64 {
	bm, bv := meanKVB(bs)
	tm, tv := meanKVB(ts)
	if bm <= 0 || tm <= 0 {
		return math.Inf(1)
	}
	num := math.Abs(math.Log(tm/bm) - est)
	se := logRatioSE(bm, bv, tm, tv)
	if se == 0 {
		if num == 0 {
			return 0
		}
		return math.Inf(1)
	}
	return num / se
}

// percentileInterval is the textbook circular block bootstrap percentile
// interval of t̄*/b̄* − 1, each window resampled with its own block length.
func percentileInterval(b, t []float64, o Options) (interval, error) {
	lb, lt := o.BlockLen, o.BlockLen
	if lb == 0 {
		lb, lt = politisWhite(b), politisWhite(t)
	}
	lb, lt = min(lb, len(b)), min(lt, len(t))
	r := rand.New(rand.NewPCG(o.Seed, streamID))
	bs, ts := make([]float64, len(b)), make([]float64, len(t))
	ratios := make([]float64, 0, o.Resamples)
	for range o.Resamples {
		circularBlocks(r, b, lb, bs)
		circularBlocks(r, t, lt, ts)
		if bm := mean(bs); bm > 0 {
			ratios = append(ratios, mean(ts)/bm-1)
		}
	}
	if len(ratios) < o.Resamples*19/20 {
		return interval{}, errTooVariable
	}
	slices.Sort(ratios)
	alpha := (1 - o.Confidence) / 2
	return interval{
		lo:    stat.Quantile(alpha, stat.Empirical, ratios, nil),
		hi:    stat.Quantile(1-alpha, stat.Empirical, ratios, nil),
		block: max(lb, lt),
	}, nil
}
