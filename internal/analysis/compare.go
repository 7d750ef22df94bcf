package analysis

import (
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/stat"
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
	minSamples = 4
)

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
	res.Significant = res.CILow > 0 || res.CIHigh < 0
	return res, nil
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
	out := make([]float64, 0, len(s))
	for i, v := range s {
		switch {
		case math.IsNaN(v):
			continue
		case math.IsInf(v, 0):
			return nil, fmt.Errorf("%s: sample %d is infinite", name, i)
		}
		out = append(out, v)
	}
	if len(out) < minSamples {
		return nil, fmt.Errorf("%s: %w: %d after dropping NaNs, need at least %d", name, errTooFew, len(out), minSamples)
	}
	return out, nil
}

func mean(x []float64) float64 { return stat.Mean(x, nil) }
