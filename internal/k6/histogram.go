package k6

import (
	"fmt"
	"math"
	"sort"
)

// The histogram's resolution. Bucket edges grow by 2 %, so a bucket's geometric
// middle is within 1 % of every latency in it; bucket 0 holds everything up to
// 0.05 ms, far below what a network round trip costs.
const (
	histogramMinMs  = 0.05
	histogramGrowth = 1.02
)

// Histogram is a latency histogram with log-spaced buckets, the shape run.js
// records. At Width 1, bucket i > 0 counts latencies in
// (MinMs·Growth^(i-1), MinMs·Growth^i] and bucket 0 those up to MinMs. A pod whose
// summary would not fit the termination message coarsens its histogram: at Width w
// (a power of two) bucket j holds the Width-1 buckets j·w … j·w+w-1.
type Histogram struct {
	MinMs  float64
	Growth float64
	Width  int
	// Buckets are the non-empty buckets in ascending Index order.
	Buckets []Bucket
}

// Bucket is one non-empty bucket of a Histogram.
type Bucket struct {
	Index int
	Count int64
}

// NewHistogram returns an empty histogram with run.js's resolution.
func NewHistogram() Histogram {
	return Histogram{MinMs: histogramMinMs, Growth: histogramGrowth, Width: 1}
}

// IsZero reports whether h is absent (a summary without a histogram), as opposed
// to present and empty.
func (h Histogram) IsZero() bool {
	return h.Width == 0
}

// bucketIndex is the Width-1 bucket of a latency, the same as run.js's bucketOf
// except that it has no last, catch-all bucket.
func bucketIndex(ms, minMs, growth float64) int {
	if !(ms > minMs) {
		return 0
	}
	return int(math.Ceil(math.Log(ms/minMs) / math.Log(growth)))
}

// Add counts one latency, in milliseconds, at Width 1. It exists for tests and for
// merging raw samples; k6 pods fill their histograms in run.js.
func (h *Histogram) Add(ms float64) {
	i := bucketIndex(ms, h.MinMs, h.Growth) / h.Width
	k := sort.Search(len(h.Buckets), func(k int) bool { return h.Buckets[k].Index >= i })
	if k < len(h.Buckets) && h.Buckets[k].Index == i {
		h.Buckets[k].Count++
		return
	}
	h.Buckets = append(h.Buckets, Bucket{})
	copy(h.Buckets[k+1:], h.Buckets[k:])
	h.Buckets[k] = Bucket{Index: i, Count: 1}
}

// Total is the number of latencies counted.
func (h Histogram) Total() int64 {
	var n int64
	for _, b := range h.Buckets {
		n += b.Count
	}
	return n
}

// withWidth regroups h to a coarser width, a power-of-two multiple of its own.
// Grouping is floor(i/width) at every width, so regrouping never splits a bucket.
func (h Histogram) withWidth(width int) Histogram {
	out := Histogram{MinMs: h.MinMs, Growth: h.Growth, Width: width}
	factor := width / h.Width
	for _, b := range h.Buckets {
		j := b.Index / factor
		if n := len(out.Buckets); n > 0 && out.Buckets[n-1].Index == j {
			out.Buckets[n-1].Count += b.Count
			continue
		}
		out.Buckets = append(out.Buckets, Bucket{Index: j, Count: b.Count})
	}
	return out
}

// MergeHistograms adds histograms of the same resolution, at the coarsest width
// among them. Counts add exactly, so percentiles of the merge are as good as those
// of one histogram: this is how percentiles of several pods are combined, never by
// averaging the pods' percentiles.
func MergeHistograms(hs ...Histogram) (Histogram, error) {
	if len(hs) == 0 {
		return NewHistogram(), nil
	}
	width := 1
	for _, h := range hs {
		if h.MinMs != hs[0].MinMs || h.Growth != hs[0].Growth {
			return Histogram{}, fmt.Errorf("histograms of different resolutions (%g ms × %g and %g ms × %g) cannot be merged",
				hs[0].MinMs, hs[0].Growth, h.MinMs, h.Growth)
		}
		if h.Width < 1 || h.Width&(h.Width-1) != 0 {
			return Histogram{}, fmt.Errorf("histogram width %d is not a power of two", h.Width)
		}
		width = max(width, h.Width)
	}
	counts := map[int]int64{}
	for _, h := range hs {
		for _, b := range h.withWidth(width).Buckets {
			counts[b.Index] += b.Count
		}
	}
	out := Histogram{MinMs: hs[0].MinMs, Growth: hs[0].Growth, Width: width}
	for i, c := range counts {
		out.Buckets = append(out.Buckets, Bucket{Index: i, Count: c})
	}
	sort.Slice(out.Buckets, func(a, b int) bool { return out.Buckets[a].Index < out.Buckets[b].Index })
	return out, nil
}

// Quantile returns the q-quantile (0 ≤ q ≤ 1) in milliseconds, the way k6
// computes its percentiles from raw samples: interpolated between the latencies of
// 0-based ranks ⌊q·(n-1)⌋ and the next, each read as its bucket's geometric middle.
// At Width 1 every such reading is within 1 % of the latency it stands for, and
// so is the interpolation. An empty histogram gives 0.
func (h Histogram) Quantile(q float64) float64 {
	total := h.Total()
	if total == 0 {
		return 0
	}
	pos := min(max(q, 0), 1) * float64(total-1)
	lo := int64(math.Floor(pos))
	v := h.atRank(lo)
	if frac := pos - float64(lo); frac > 0 {
		v += frac * (h.atRank(lo+1) - v)
	}
	return v
}

// atRank is the middle of the bucket holding the latency of 0-based rank r.
func (h Histogram) atRank(r int64) float64 {
	var seen int64
	for _, b := range h.Buckets {
		seen += b.Count
		if seen > r {
			return h.middle(b.Index)
		}
	}
	return h.middle(h.Buckets[len(h.Buckets)-1].Index)
}

// middle is the geometric middle of bucket j. Bucket j spans the Width-1 buckets
// j·w … j·w+w-1, that is (MinMs·Growth^(j·w-1), MinMs·Growth^(j·w+w-1)]; the
// first bucket starts at 0 instead, and its middle is taken as if it started at
// MinMs/Growth.
func (h Histogram) middle(j int) float64 {
	lo := float64(j*h.Width) - 1
	hi := float64(j*h.Width+h.Width) - 1
	return h.MinMs * math.Pow(h.Growth, (lo+hi)/2)
}

// encode flattens the buckets to [gap, count, gap, count, ...], gap being the
// distance from the previous non-empty bucket (from 0 for the first): the form
// run.js writes, short enough to fit a termination message.
func (h Histogram) encode() []int64 {
	out := make([]int64, 0, 2*len(h.Buckets))
	previous := 0
	for _, b := range h.Buckets {
		out = append(out, int64(b.Index-previous), b.Count)
		previous = b.Index
	}
	return out
}

// decodeHistogram is the inverse of encode, checking what a damaged summary could
// get wrong.
func decodeHistogram(minMs, growth float64, width int, flat []int64) (Histogram, error) {
	switch {
	case !(minMs > 0) || !(growth > 1):
		return Histogram{}, fmt.Errorf("histogram resolution %g ms × %g is not positive and growing", minMs, growth)
	case width < 1 || width&(width-1) != 0:
		return Histogram{}, fmt.Errorf("histogram width %d is not a power of two", width)
	case len(flat)%2 != 0:
		return Histogram{}, fmt.Errorf("histogram has %d numbers, not gap and count pairs", len(flat))
	}
	h := Histogram{MinMs: minMs, Growth: growth, Width: width}
	index := int64(0)
	for k := 0; k < len(flat); k += 2 {
		gap, count := flat[k], flat[k+1]
		if gap < 0 || (k > 0 && gap == 0) || count < 1 || index+gap > math.MaxInt32 {
			return Histogram{}, fmt.Errorf("histogram pair %d (gap %d, count %d) is out of order or empty", k/2, gap, count)
		}
		index += gap
		h.Buckets = append(h.Buckets, Bucket{Index: int(index), Count: count})
	}
	return h, nil
}
