package analysis

import (
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
)

// Series is one window's samples of one metric, evenly spaced (the target's total
// over its pods), in the metric's unit.
type Series []float64

// IntervalMethod chooses how Compare builds the confidence interval.
type IntervalMethod string

const (
	// IntervalStudentized is the default (also chosen by ""): symmetric
	// bootstrap-t of the log ratio, KVB-studentized, over AR(1)-prewhitened
	// circular blocks. See the package documentation.
	IntervalStudentized IntervalMethod = "studentized"
	// IntervalPercentile is the circular block bootstrap percentile interval of
	// the ratio of means, with BlockLen 1 the i.i.d. bootstrap. It undercovers on
	// autocorrelated data and is kept for comparison.
	IntervalPercentile IntervalMethod = "percentile"
)

// Options tune Compare. Zero Resamples and Confidence take their defaults.
type Options struct {
	// Resamples is the number of bootstrap resamples (at least 99 when set).
	Resamples int
	// Seed makes the resampling reproducible.
	Seed uint64
	// Confidence is the interval's coverage, such as 0.95.
	Confidence float64
	// BlockLen is the circular block length; 0 chooses it per window from the
	// sample autocorrelation (Politis–White), 1 resamples single points.
	BlockLen int
	// Interval is the interval method; "" is IntervalStudentized.
	Interval IntervalMethod
}

// The defaults. 1,999 resamples put the 95 % quantile exactly on the 1,900th
// order statistic and cost a few milliseconds per metric.
const (
	DefaultResamples  = 1999
	DefaultConfidence = 0.95
	DefaultSeed       = 1
	// minSamples is the fewest samples a window may have: the AR fit and the
	// block length need a few lags. Below ~20 the interval is honest but wide.
	// Admission asks for windows that keep that many (perfv1.MinMeasuredWindow).
	minSamples = perfv1.MinWindowSamples
)

// FamilyConfidence is each interval's coverage when k comparisons share one
// run (the variants of a stage): 1 − (1 − DefaultConfidence)/k (Bonferroni),
// so that all k hold together at DefaultConfidence; DefaultConfidence for one.
func FamilyConfidence(k int) float64 {
	if k <= 1 {
		return DefaultConfidence
	}
	return 1 - (1-DefaultConfidence)/float64(k)
}

// DefaultOptions are the options the operator uses.
func DefaultOptions() Options {
	return Options{Resamples: DefaultResamples, Seed: DefaultSeed, Confidence: DefaultConfidence, Interval: IntervalStudentized}
}

// Result compares one metric's baseline and treatment windows.
type Result struct {
	// Baseline and Treatment are the window means.
	Baseline, Treatment float64
	// Delta is Treatment − Baseline, in the metric's unit.
	Delta float64
	// Overhead is Treatment/Baseline − 1 (0.041 is +4.1 %).
	Overhead float64
	// CILow and CIHigh bound Overhead at the chosen confidence.
	CILow, CIHigh float64
	// Significant is true when the interval excludes 0.
	Significant bool
	// N are the samples used (after dropping NaNs): baseline, treatment.
	N [2]int
	// BlockLen is the larger of the two windows' block lengths.
	BlockLen int
	// MDE is the minimum detectable effect: the relative overhead the same
	// design (window lengths or rounds, and this run's noise) finds
	// significant in Power of runs. 0 when unknown.
	MDE float64
	// Rounds is the number of rounds compared (CompareRounds); 0 for two
	// windows.
	Rounds int
}

// Compare compares baseline and treatment of one metric: the relative overhead
// (t̄ − b̄)/b̄ with a confidence interval that respects autocorrelation (see the
// package documentation). NaN samples are dropped (a missed scrape); infinite
// samples, windows with fewer than 4 samples and non-positive means are errors.
func Compare(baseline, treatment Series, o Options) (Result, error) {
	o, err := o.withDefaults()
	if err != nil {
		return Result{}, err
	}
	b, err := clean("baseline", baseline)
	if err != nil {
		return Result{}, err
	}
	t, err := clean("treatment", treatment)
	if err != nil {
		return Result{}, err
	}
	bm, tm := mean(b), mean(t)
	if bm <= 0 {
		return Result{}, fmt.Errorf("baseline mean is %g: a relative overhead needs a positive baseline", bm)
	}
	if tm <= 0 {
		return Result{}, fmt.Errorf("treatment mean is %g: a relative overhead needs a positive treatment", tm)
	}
	res := Result{Baseline: bm, Treatment: tm, Delta: tm - bm, Overhead: tm/bm - 1, N: [2]int{len(b), len(t)}}
	var iv interval
	if o.Interval == IntervalPercentile {
		iv, err = percentileInterval(b, t, o)
	} else {
		iv, err = studentizedInterval(b, t, o)
	}
	if err != nil {
		return Result{}, err
	}
	res.CILow, res.CIHigh, res.BlockLen = iv.lo, iv.hi, iv.block
	if o.Interval == IntervalStudentized {
		res.CILow, res.CIHigh = withinSpread(b, t, res.CILow, res.CIHigh)
	}
	res.Significant = res.CILow > 0 || res.CIHigh < 0
	res.MDE = mde(res.CILow, res.CIHigh, iv.crit, distuv.UnitNormal.Quantile(Power))
	return res, nil
}

// withinSpread caps an interval at what the two windows' own spread allows:
// no ratio of a treatment sample to a baseline sample lies outside
// [min t / max b, max t / min b], so neither does the ratio of their means. On
// short windows the conservative AR coefficient (package documentation, step 5)
// can widen the bootstrap interval far past that: a step anyone sees by eye,
// 16 points above series flat within 2 %, got ±16 points before the cap.
//
// The cap holds only for windows whose samples vary around a level: one that
// wanders (its lag-1 autocorrelation, bias-corrected, above capMaxPhi, as
// memory does over 5 minutes) has not shown its range yet, and keeps the
// bootstrap interval.
func withinSpread(b, t []float64, lo, hi float64) (float64, float64) {
	if max(lag1(b), lag1(t)) > capMaxPhi {
		return lo, hi
	}
	bmin, bmax := minMax(b)
	tmin, tmax := minMax(t)
	if bmin <= 0 {
		return lo, hi // a ratio to a non-positive sample bounds nothing
	}
	return math.Max(lo, tmin/bmax-1), math.Min(hi, tmax/bmin-1)
}

// capMaxPhi is the largest bias-corrected lag-1 autocorrelation at which
// withinSpread caps an interval.
const capMaxPhi = 0.5

// lag1 is the lag-1 autocorrelation with Kendall's bias correction.
func lag1(x []float64) float64 {
	g := autocov(x, 1)
	if g[0] <= 0 {
		return 0
	}
	phi := g[1] / g[0]
	return phi + (1+3*phi)/float64(len(x))
}

func minMax(x []float64) (lo, hi float64) {
	lo, hi = x[0], x[0]
	for _, v := range x[1:] {
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	return lo, hi
}

// CompareLatency compares one latency percentile from two windows. k6 reports
// exact per-window percentiles, not samples, so there is nothing to resample:
// Overhead is (t − b)/b, the interval collapses to it (CILow = CIHigh =
// Overhead) and Significant is always false. A later version that keeps the
// windows' latency histograms can bootstrap requests instead. A baseline that
// is not positive (unknown) gives Overhead 0, never NaN, so the status stays
// encodable.
func CompareLatency(baseline, treatment float64) Result {
	r := Result{Baseline: baseline, Treatment: treatment, Delta: treatment - baseline}
	if baseline > 0 && !math.IsInf(baseline, 0) && !math.IsNaN(treatment) && !math.IsInf(treatment, 0) {
		r.Overhead = treatment/baseline - 1
	}
	if math.IsNaN(r.Delta) || math.IsInf(r.Delta, 0) {
		r.Delta = 0
	}
	r.CILow, r.CIHigh = r.Overhead, r.Overhead
	return r
}

func (o Options) withDefaults() (Options, error) {
	if o.Resamples == 0 {
		o.Resamples = DefaultResamples
	}
	if o.Confidence == 0 {
		o.Confidence = DefaultConfidence
	}
	if o.Interval == "" {
		o.Interval = IntervalStudentized
	}
	switch {
	case o.Resamples < 99:
		return o, fmt.Errorf("options: %d resamples; need at least 99", o.Resamples)
	case !(o.Confidence > 0 && o.Confidence < 1):
		return o, fmt.Errorf("options: confidence %g must be between 0 and 1", o.Confidence)
	case o.BlockLen < 0:
		return o, fmt.Errorf("options: block length %d is negative", o.BlockLen)
	case o.Interval != IntervalStudentized && o.Interval != IntervalPercentile:
		return o, fmt.Errorf("options: unknown interval method %q", o.Interval)
	}
	return o, nil
}

// errTooFew is wrapped by clean so callers can tell missing data from bad data.
var errTooFew = errors.New("too few samples")

// clean drops NaNs (a missed scrape shortens the window; the remaining samples
// are still in time order) and refuses infinities, which only a bug upstream
// produces.
func clean(name string, s Series) ([]float64, error) {
	out, err := cleanMin(s, minSamples)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}

func isTooFew(err error) bool { return errors.Is(err, errTooFew) }

func mean(x []float64) float64 { return stat.Mean(x, nil) }
