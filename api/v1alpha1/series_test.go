package v1alpha1

import (
	"math"
	"math/rand/v2"
	"reflect"
	"regexp"
	"testing"
)

func TestPackedSeriesRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	walk := make([]int64, MaxSeriesPoints)
	x := int64(2 << 30)
	for i := range walk {
		x += int64(rng.NormFloat64() * (20 << 20))
		walk[i] = x
	}
	base64 := regexp.MustCompile(`^[A-Za-z0-9+/]*={0,2}$`)
	for name, v := range map[string][]int64{
		"one":         {42},
		"negative":    {-5, 3, -7, 0},
		"flat":        {1000, 1000, 1000},
		"extremes":    {math.MaxInt64, math.MinInt64, 0, math.MinInt64, math.MaxInt64},
		"memory walk": walk,
	} {
		p := PackSeries(v)
		got, err := p.Values()
		if err != nil || !reflect.DeepEqual(got, v) {
			t.Errorf("%s: %v → %q → %v, %v", name, v, p, got, err)
		}
		if !base64.MatchString(string(p)) || len(p) > 8192 {
			t.Errorf("%s: %d characters outside the schema's pattern or length", name, len(p))
		}
	}
	if p := PackSeries(nil); p != "" {
		t.Errorf("empty series packs to %q", p)
	}
	if v, err := PackedSeries("").Values(); v != nil || err != nil {
		t.Errorf("empty unpacks to %v, %v", v, err)
	}
	// A full window of working-set memory stays well under the limit, and
	// small steps cost little.
	if n := len(PackSeries(walk)); n > 1400 {
		t.Errorf("240 memory points take %d characters", n)
	}
	if n := len(PackSeries([]int64{500, 501, 499, 502, 500, 498})); n != 12 {
		t.Errorf("six millicore points take %d characters, want 12", n)
	}
}

func TestPackedSeriesRefusesGarbage(t *testing.T) {
	for _, p := range []PackedSeries{"!!", "gA==", "////////////////"} {
		if _, err := p.Values(); err == nil {
			t.Errorf("%q unpacked", p)
		}
	}
}

func TestWindowSeriesValues(t *testing.T) {
	s := &WindowSeries{StepSeconds: 15}
	s.SetValues(SeriesValues{CPUMillicores: []int64{1, 2}, MemoryBytes: []int64{3, 4}, HeapBytes: []int64{5, 6}})
	v, err := s.Values()
	if err != nil || s.Points != 2 || !reflect.DeepEqual(v.HeapBytes, []int64{5, 6}) || !reflect.DeepEqual(v.CPUMillicores, []int64{1, 2}) {
		t.Fatalf("%+v %+v %v", s, v, err)
	}
	s.Heap = PackSeries([]int64{5})
	if v, _ := s.Values(); v.HeapBytes != nil {
		t.Errorf("a heap series shorter than cpu was kept: %v", v.HeapBytes)
	}
}
