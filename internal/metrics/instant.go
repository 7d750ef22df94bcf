package metrics

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Expect completes one instant's samples against the pods that are live and
// ready: a ready pod the source said nothing about gets a sample whose values
// are all Unknown, so the instant reads as incomplete (see Problem) instead of
// as a smaller sum. Samples of pods that are not ready are kept as they are.
// got is not modified; the added samples carry the Time and Window of got's
// first sample.
func Expect(got []Sample, ready []string) []Sample {
	out := slices.Clone(got)
	for _, pod := range ready {
		if slices.ContainsFunc(got, func(s Sample) bool { return s.Pod == pod }) {
			continue
		}
		s := Sample{Pod: pod, CPUCores: Unknown, WorkingSetBytes: Unknown, HeapBytes: Unknown, GCSecondsPerSecond: Unknown}
		if len(got) > 0 {
			s.Time, s.Window = got[0].Time, got[0].Window
		}
		out = append(out, s)
	}
	return out
}

// Problem says why one instant's samples (one per pod) cannot be summed into a
// window's series, or "" when they can: a pod without a finite, non-negative
// CPU or memory value (a missing series, NaN, ±Inf, a negative value) makes
// the whole instant missing, since the sum of the others would read as less
// use. An unknown heap or GC time is not a problem (most apps export none); a
// value of either that is non-finite or negative is.
func Problem(group []Sample) string {
	if len(group) == 0 {
		return "no samples"
	}
	var bad []string
	for _, s := range group {
		var what []string
		if !usable(s.CPUCores) {
			what = append(what, "cpu "+show(s.CPUCores))
		}
		if !usable(s.WorkingSetBytes) {
			what = append(what, "memory "+show(s.WorkingSetBytes))
		}
		if !math.IsNaN(s.HeapBytes) && !usable(s.HeapBytes) {
			what = append(what, "heap "+show(s.HeapBytes))
		}
		if !math.IsNaN(s.GCSecondsPerSecond) && !usable(s.GCSecondsPerSecond) {
			what = append(what, "gc "+show(s.GCSecondsPerSecond))
		}
		if len(what) > 0 {
			bad = append(bad, fmt.Sprintf("pod %s: %s", s.Pod, strings.Join(what, ", ")))
		}
	}
	if len(bad) == 0 {
		return ""
	}
	slices.Sort(bad)
	return fmt.Sprintf("%d of %d pods without usable values (%s): the instant is missing, not summed",
		len(bad), len(group), strings.Join(bad, "; "))
}

// Finite returns s with every value that is not a finite, non-negative number
// replaced by Unknown, so that no rule acts on NaN, ±Inf or a negative reading.
func Finite(s Sample) Sample {
	for _, v := range []*float64{&s.CPUCores, &s.WorkingSetBytes, &s.HeapBytes, &s.GCSecondsPerSecond} {
		if !usable(*v) {
			*v = Unknown
		}
	}
	return s
}

// FiniteAll is Finite of each sample, in a new slice.
func FiniteAll(samples []Sample) []Sample {
	out := make([]Sample, len(samples))
	for i, s := range samples {
		out[i] = Finite(s)
	}
	return out
}

func usable(v float64) bool {
	return !math.IsNaN(v) && !math.IsInf(v, 0) && v >= 0
}

func show(v float64) string {
	if math.IsNaN(v) {
		return "no value"
	}
	return fmt.Sprint(v)
}
