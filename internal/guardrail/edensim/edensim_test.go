package edensim

import (
	"math"
	"math/rand/v2"
	"testing"
)

// collections samples a pod's heap every 100 ms for an hour and returns the
// times of its young collections (falls by more than half the eden) and its
// lowest heap in each ten minutes.
func collections(p *Pod) (gcs []float64, lows []float64) {
	prev := p.Heap(0)
	low := math.Inf(1)
	for i := 1; i <= 36000; i++ {
		t := float64(i) / 10
		h := p.Heap(t)
		if prev-h > p.Eden/2 {
			gcs = append(gcs, t)
		}
		low = math.Min(low, h)
		if i%6000 == 0 {
			lows, low = append(lows, low), math.Inf(1)
		}
		prev = h
	}
	return gcs, lows
}

// TestModel: a young collection comes each time the eden fills, so the GC
// period follows the allocation rate (a toggle that allocates 30 % more
// shortens it to 1/1.3); without a leak the heap after GC stays within the
// live set's wander and the old generation's bound; a leak lifts it by its
// rate.
func TestModel(t *testing.T) {
	for _, c := range []struct {
		name        string
		gain, leak  float64
		wantPeriod  float64
		wantLowRise float64 // from the first ten minutes to the last, bytes
	}{
		{"steady", 0, 0, 60, 0},
		{"allocating 30 % more", 1.3, 0, 60 / 1.3, 0},
		{"leaking 700 MB/min", 0, 700 * MB / 60, 60, 700 * MB * 50},
	} {
		p := New(rand.New(rand.NewPCG(1, 2)), 60)
		p.Load, p.Wander = 0, 0 // a flat load and live set: the period is the eden over the rate
		p.Gain, p.GainAt = c.gain, 0
		p.Leak, p.LeakOnset = c.leak, 0
		gcs, lows := collections(p)
		period := (gcs[len(gcs)-1] - gcs[0]) / float64(len(gcs)-1)
		if math.Abs(period-c.wantPeriod) > 0.03*c.wantPeriod {
			t.Errorf("%s: mean GC period %.1f s, want %.1f s", c.name, period, c.wantPeriod)
		}
		rise := lows[len(lows)-1] - lows[0]
		// Without a leak the heap after GC moves only with the old
		// generation, which mixed collections keep below the occupancy.
		if math.Abs(rise-c.wantLowRise) > p.Occupancy-p.Live {
			t.Errorf("%s: heap after GC rose %.2f GB in 50 minutes, want %.2f GB ± %.2f", c.name, rise/GB, c.wantLowRise/GB, (p.Occupancy-p.Live)/GB)
		}
		for _, l := range lows {
			if l < p.Live || (c.leak == 0 && l > p.Occupancy+p.Eden) {
				t.Errorf("%s: heap after GC %.2f GB outside [%.2f, %.2f] GB", c.name, l/GB, p.Live/GB, (p.Occupancy+p.Eden)/GB)
			}
		}
	}
}

// TestReproducible: the same seed gives the same trace.
func TestReproducible(t *testing.T) {
	a, b := New(rand.New(rand.NewPCG(7, 7)), 20), New(rand.New(rand.NewPCG(7, 7)), 20)
	a.Noise, b.Noise = 0.02, 0.02
	for i := 0; i < 1000; i++ {
		t0 := float64(i) * 15
		ha, wa := a.Sample(t0)
		hb, wb := b.Sample(t0)
		if ha != hb || wa != wb {
			t.Fatalf("sample %d: %v/%v against %v/%v", i, ha, wa, hb, wb)
		}
	}
}
