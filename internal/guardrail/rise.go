package guardrail

import "math"

// The intermediate evidence: the floor rose at every one of the newest GCs.
//
// The jump (jump.go) needs the teeth to be measurably steeper within two
// cycles, which per-sample noise of 2–3 % hides; the floor trend (growth.go)
// needs six floors and a rank test. Between them: when the pod's floors sit in a
// tight band (the GC period is a multiple of the sampling interval, so every
// floor is sampled at the same phase of its cycle, and the noise is what
// spreads them), a leak shows as a floor that climbs out of the band and goes on
// climbing, by about the same amount, at every GC — while a healthy floor moves
// once (a step), or over a single ramp that a cache fill of up to a minute
// spans. The evidence asks for:
//   - riseCount(P) rises in a row of consecutive floors (no GC cycle missed or
//     merged), the first from within the band (a floor read below it counts
//     as the band's bottom), each above the band's width plus riseSigmas
//     standard deviations of the noise at the new floor's level: a cache
//     filled over up to
//     fillRamp seconds moves at most ⌈fillRamp/P⌉+1 floors, so one rise more
//     than that cannot come from one fill;
//   - the rises alike: every one after the first (which may be part of a
//     cycle) at least riseRatio of the largest — a fill split over two GCs,
//     or a step with noise on top, gives one big rise and small ones;
//   - every rise after the first seen on its whole tooth as well: the median
//     of the floors' rise and the rise of each point after them clears the
//     band by the noise of that median (a floor read high, or sampled late
//     in its cycle, lifts one point; a leak lifts the cycle);
//   - the floors' rate over the window above the growth limit (a wandering
//     live set is slower).
//
// When the floors spread over the sampling phase (periods that drift against
// the interval), the band is taken as one interval's allocation wide, and a
// leak's rise per cycle is often no larger: the evidence then rarely fires, and
// the jump and the trend decide, as before. test/bench/guardrail measures it:
// with GC exactly every 60 s and 15 s samples, p95 from onset to abort at 2 %
// noise went from 455 to 265 s, at 3 % from 644 to 501 s, with no false abort
// of its own in 11,000 healthy pod-hours per noise level.
const (
	// riseSigmas: each rise must clear the band's width by one standard
	// deviation of the difference of two floors' noise at the new floor's
	// level (the band's width holds the noise at its own level already; the
	// noise grows with the level).
	riseSigmas = 1
	// riseRatio: the newest two rises differ by at most a factor of two.
	riseRatio = 0.5
	// fillRamp is the longest cache fill (seconds) the evidence must not take
	// for a leak.
	fillRamp = 60
	// maxRises bounds the rises asked for (GC every 10 s or faster).
	maxRises = 8
)

// riseCount is how many rises in a row the evidence needs at a GC period of
// p seconds: one more than a cache fill of fillRamp seconds can cause.
func riseCount(p float64) int {
	return min(maxRises, int(math.Ceil(fillRamp/p))+2)
}

// riseEvidence tests the newest floors. It uses the teeth jumpEvidence found.
func (w *workspace) riseEvidence(spacing, theta float64) (verdict, bool) {
	th := w.th
	// The floors and their times, newest last; a tooth without a floor (a gap,
	// a missed sample at the GC) breaks the run of consecutive floors.
	ft, fy := w.ft[:0], w.fy[:0]
	run := 0
	for _, x := range th {
		if !x.floor {
			run = 0
			continue
		}
		ft, fy = append(ft, w.ct[x.lo]), append(fy, w.cy[x.lo])
		run++
	}
	w.ft, w.fy = ft, fy
	if len(fy) < minRefTeeth+3 || run < 4 {
		return verdict{}, false
	}
	// The GC period: the median time between consecutive floors.
	d := w.d[:0]
	for i := 1; i < len(ft); i++ {
		d = append(d, ft[i]-ft[i-1])
	}
	period := median(d)
	need := riseCount(period)
	if run < need+1 || len(fy)-need-1 < minRefTeeth {
		return verdict{}, false
	}
	win := len(fy) - need - 1 // the window's first floor, the last of the reference
	ref := append(w.c[:0], fy[:win]...)
	m := median(ref)
	// The band's width: the reference floors' range, widened to what the range
	// of a uniform spread is when n draws show (n-1)/(n+1) of it. An odd floor
	// widens it, which only makes the evidence more careful.
	k := float64(len(ref))
	lowest, top := nth(ref, 0), nth(ref, len(ref)-1)
	width := (top - lowest) * (k + 1) / (k - 1)
	// Floors sampled at drifting phases spread over up to one interval's
	// allocation, and a dozen of them can show much less of that spread by
	// chance. The phase stays put only when every GC cycle lasts the same
	// whole number of intervals (the GC period is a multiple of the interval):
	// otherwise the band is taken as wide as the phase can make it.
	if !sameCycles(ft, period, spacing) {
		width = math.Max(width, w.reference(0, th[len(th)-1].lo).rate*spacing)
	}
	// Noise relative to the level: the floors' noise where the band is,
	// scaled to each floor's level.
	relNoise := math.Max(w.relNoise(0, th[len(th)-1].lo, spacing), minNoise)
	// The climb starts in the band: a window's first floor below every
	// reference floor (a scrape read low, heavy-tailed noise) is taken at the
	// band's bottom. A rise from below the band back into it is no climb out
	// of it; measured from the low floor it counted as one, and a cache fill
	// at the two GCs after it made the rest (GC exactly every 60 s, 2–3 % t3
	// noise: floors 1.59, 1.36, 1.58, 1.81, 2.02 GB over a band of
	// 1.52–1.63 GB, test/bench/guardrail with seeds shifted by 5,000,000).
	// From a floor inside the band the test is unchanged.
	start := math.Max(fy[win], lowest)
	prev := start
	for i := win + 1; i < len(fy); i++ {
		rise := fy[i] - prev
		if !(rise > width+riseSigmas*math.Sqrt2*relNoise*fy[i]) || ft[i]-ft[i-1] > 1.5*period {
			return verdict{}, false
		}
		prev = fy[i]
	}
	// A leak adds about the same at every GC (the first rise may be part of a
	// cycle); one fill of a cache, or a step with noise on top, does not.
	least, most := math.Inf(1), fy[win+1]-start
	for i := win + 2; i < len(fy); i++ {
		least = math.Min(least, fy[i]-fy[i-1])
		most = math.Max(most, fy[i]-fy[i-1])
	}
	if least < riseRatio*most {
		return verdict{}, false
	}
	// Each rise after the first clears the band on its whole tooth too, by
	// the noise of the tooth's median rise (toothRise; the window's floors are
	// the newest teeth, one each). Three rises in a row at GC every 60 s were
	// a cache fill's two and a floor read high (2 % t3 noise, floors 1.59,
	// 1.79, 1.95, 2.13 GB, the two points after the last one 0.00 and 0.04 GB
	// below the cycle's before), and at GC every 90 s a fill's two and a floor
	// sampled late in its cycle (3 % t3); test/bench/guardrail with seeds
	// shifted by 5,000,000 and 20,000,000. The first rise is not asked: a leak
	// that starts within the cycle before it lifts that cycle's later points
	// too. A tooth that has only its floor yet is asked at the next sample.
	for i := win + 2; i < len(fy); i++ {
		cur := len(th) - (len(fy) - i)
		med, level, n := w.toothRise(th[cur-1], th[cur], fy[i]-fy[i-1])
		if n > 1 && !(med > width+riseSigmas*math.Sqrt2*relNoise*level) {
			return verdict{}, false
		}
	}
	n := len(fy)
	rate := (fy[n-1] - start) / (ft[n-1] - ft[win])
	if !(rate > theta) {
		return verdict{}, false
	}
	sigma := relNoise * m
	return verdict{breach: true, slope: rate, kind: evidenceRise, floorNow: fy[n-1], floorRef: m, sigmas: (fy[n-1] - m) / sigma}, true
}

// toothRise is the rise of tooth cur over the tooth before it measured on
// their whole: the median of the floors' rise and each later point's (the
// k-th after each floor); with n, how many differences that is, and level,
// the level that scales its noise (each difference's noise scales with its
// point's level: the root of their sum of squares over n, the floor's own
// level for n = 1). A leak lifts the whole cycle; a floor read high
// (heavy-tailed noise, or a late phase when the GC drifts against the samples)
// lifts that one point. A tooth's points share its sampling phase, so the
// median is as wide as the band but has about the noise of n differences, not
// one; the median, not the mean, so that one point read far off (Student-t3
// noise put one 1.5 GB above its tooth) does not decide either way.
func (w *workspace) toothRise(prev, cur tooth, rise float64) (med, level float64, n int) {
	m := min(cur.hi-cur.lo, prev.hi-prev.lo) - 1
	d, squares := append(w.d[:0], rise), w.cy[cur.lo]*w.cy[cur.lo]
	for k := 1; k <= m; k++ {
		d = append(d, w.cy[cur.lo+k]-w.cy[prev.lo+k])
		squares += w.cy[cur.lo+k] * w.cy[cur.lo+k]
	}
	w.d = d
	n = m + 1
	return median(d), math.Sqrt(squares) / float64(n), n
}

// relNoise is the noise of single points relative to their level, from the
// points [lo, hi): the second differences of three points in one GC cycle,
// each relative to its middle point's level. A tooth is a straight line, so
// they are noise alone, √6 standard deviations of one point's.
func (w *workspace) relNoise(lo, hi int, spacing float64) float64 {
	d := w.b[:0]
	for i := lo + 1; i+1 < hi; i++ {
		if w.block[i-1] != w.block[i] || w.block[i] != w.block[i+1] {
			continue
		}
		s1 := (w.cy[i] - w.cy[i-1]) / (w.ct[i] - w.ct[i-1])
		s2 := (w.cy[i+1] - w.cy[i]) / (w.ct[i+1] - w.ct[i])
		d = append(d, math.Abs(s2-s1)*spacing/w.cy[i])
	}
	w.b = d
	return 1.4826 * median(d) / math.Sqrt(6)
}

// sameCycles reports whether the floors come at the same period every cycle,
// to within a quarter interval (scrape jitter): the sampling phase of every
// floor is then the same.
func sameCycles(ft []float64, period, spacing float64) bool {
	for i := 1; i < len(ft); i++ {
		if math.Abs(ft[i]-ft[i-1]-period) > spacing/4 {
			return false
		}
	}
	return true
}
