package k6

import (
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// exactPercentile is k6's percentile of raw samples: linear interpolation
// between the two nearest ranks.
func exactPercentile(sorted []float64, p float64) float64 {
	pos := p * float64(len(sorted)-1)
	lo := int(math.Floor(pos))
	if lo+1 >= len(sorted) {
		return sorted[len(sorted)-1]
	}
	return sorted[lo] + (pos-float64(lo))*(sorted[lo+1]-sorted[lo])
}

// logNormal draws n latencies around median ms.
func logNormal(r *rand.Rand, n int, median, sigma float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = median * math.Exp(sigma*r.NormFloat64())
	}
	return out
}

func histogramOf(samples []float64) Histogram {
	h := NewHistogram()
	for _, s := range samples {
		h.Add(s)
	}
	return h
}

// TestHistogramResolution: every latency's bucket middle is within 1 % of it.
func TestHistogramResolution(t *testing.T) {
	for ms := 0.06; ms < 400000; ms *= 1.0037 {
		h := histogramOf([]float64{ms})
		if got := h.Quantile(0.5); math.Abs(got/ms-1) > 0.01 {
			t.Fatalf("%g ms reads back as %g ms", ms, got)
		}
	}
	if got := histogramOf([]float64{0, 0.01}).Quantile(1); got > histogramMinMs {
		t.Errorf("sub-0.05 ms latencies read back as %g ms", got)
	}
	if got := NewHistogram().Quantile(0.99); got != 0 {
		t.Errorf("empty histogram p99 %g", got)
	}
}

// TestMergedPercentiles is the reason for histograms: two pods with different
// latencies merge into percentiles within 2 % of the exact ones of all samples.
func TestMergedPercentiles(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		name string
		a, b []float64
	}{
		{name: "similar pods", a: logNormal(r, 20000, 12, 0.4), b: logNormal(r, 18000, 13, 0.4)},
		{name: "one slow pod", a: logNormal(r, 20000, 3, 0.3), b: logNormal(r, 5000, 80, 0.8)},
		{name: "sub-millisecond", a: logNormal(r, 10000, 0.4, 0.2), b: logNormal(r, 10000, 0.5, 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			merged, err := MergeHistograms(histogramOf(tc.a), histogramOf(tc.b))
			if err != nil {
				t.Fatal(err)
			}
			all := slices.Sorted(slices.Values(append(slices.Clone(tc.a), tc.b...)))
			if merged.Total() != int64(len(all)) {
				t.Fatalf("merged %d samples of %d", merged.Total(), len(all))
			}
			for _, p := range []float64{0.5, 0.95, 0.99} {
				exact, got := exactPercentile(all, p), merged.Quantile(p)
				if math.Abs(got/exact-1) > 0.02 {
					t.Errorf("p%g: merged %g ms, exact %g ms", p*100, got, exact)
				}
			}
		})
	}
}

func TestMergeHistogramsWidths(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	fine := histogramOf(logNormal(r, 5000, 20, 0.5))
	coarse := histogramOf(logNormal(r, 5000, 20, 0.5)).withWidth(4)
	merged, err := MergeHistograms(fine, coarse)
	if err != nil {
		t.Fatal(err)
	}
	if merged.Width != 4 || merged.Total() != 10000 {
		t.Errorf("merged width %d, total %d", merged.Width, merged.Total())
	}
	if !reflect.DeepEqual(merged, mustMerge(t, fine.withWidth(4), coarse)) {
		t.Error("merging at a coarser width differs from regrouping first")
	}
	other := NewHistogram()
	other.Growth = 1.05
	if _, err := MergeHistograms(fine, other); err == nil {
		t.Error("merged histograms of different resolutions")
	}
}

func mustMerge(t *testing.T, hs ...Histogram) Histogram {
	t.Helper()
	m, err := MergeHistograms(hs...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestHistogramWithWidth(t *testing.T) {
	h := Histogram{MinMs: 0.05, Growth: 1.02, Width: 1, Buckets: []Bucket{{0, 1}, {1, 2}, {2, 3}, {5, 4}, {8, 5}}}
	want := []Bucket{{0, 3}, {1, 3}, {2, 4}, {4, 5}}
	if got := h.withWidth(2).Buckets; !reflect.DeepEqual(got, want) {
		t.Errorf("width 2: %v, want %v", got, want)
	}
	if got := h.withWidth(2).withWidth(4); !reflect.DeepEqual(got, h.withWidth(4)) {
		t.Errorf("regrouping twice %v differs from once %v", got, h.withWidth(4))
	}
}

func TestHistogramEncoding(t *testing.T) {
	h := Histogram{MinMs: 0.05, Growth: 1.02, Width: 2, Buckets: []Bucket{{0, 7}, {3, 1}, {4, 250}, {90, 2}}}
	flat := h.encode()
	if want := []int64{0, 7, 3, 1, 1, 250, 86, 2}; !reflect.DeepEqual(flat, want) {
		t.Errorf("encoded %v, want %v", flat, want)
	}
	back, err := decodeHistogram(0.05, 1.02, 2, flat)
	if err != nil || !reflect.DeepEqual(back, h) {
		t.Errorf("decoded %+v, %v", back, err)
	}
	for name, tc := range map[string]struct {
		width int
		flat  []int64
	}{
		"odd length":         {1, []int64{0, 1, 2}},
		"repeated bucket":    {1, []int64{3, 1, 0, 1}},
		"negative gap":       {1, []int64{-1, 1}},
		"empty bucket":       {1, []int64{3, 0}},
		"width not a power":  {3, []int64{0, 1}},
		"width zero":         {0, nil},
		"index out of range": {1, []int64{math.MaxInt32, 1, 1, 1}},
	} {
		if _, err := decodeHistogram(0.05, 1.02, tc.width, tc.flat); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
	if _, err := decodeHistogram(0, 1.02, 1, nil); err == nil {
		t.Error("decoded a histogram of zero resolution")
	}
}
