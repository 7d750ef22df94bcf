package guardrail

import "math"

// The runaway-heap rule.
//
// A JVM heap under steady load is a sawtooth: it climbs at the allocation rate
// (2.7 GB/min in the seed story) and drops at each GC. Its raw trend over a few
// minutes is meaningless — within a cycle it is the allocation rate, across a GC
// it is hugely negative — so the rule never fits a line through raw samples. It
// looks at the heap the way a GC log does: what is left after each GC (the
// floor) is the live set, and a leak is a live set that keeps growing. The
// teeth's slope alone cannot tell a leak from a toggle that only allocates more
// (a profiler): both steepen the teeth, only the leak lifts the floor.
//
// Four pieces of evidence, evaluated on every new point; any one is a breach
// and the caller aborts after ConsecutiveBreaches breaches in a row:
//
//  1. Jump (fast, two GC cycles; jump.go): the newest floor is far above the
//     band of the pod's own earlier floors and the newest teeth are steeper.
//  2. Ramp (fast, for series without a sawtooth, such as a Go working set):
//     the last six to ten points rise steadily, well beyond the noise; or
//     (sustain.go) they rise faster than the limit in every stretch that
//     any one cache fill of up to a minute leaves.
//  3. Rise (three to five GC cycles; rise.go): with every floor sampled at the
//     same phase of its cycle, the floor climbed out of its band and kept
//     climbing by about the same amount at every GC, more often than one
//     cache fill can make it — what decides at 2–3 % noise, where the teeth
//     are too noisy for the jump.
//  4. Floor trend (slow, six GC cycles or more): the heap after each GC (the
//     first sample of each cycle; for a series without GC drops, the median of
//     every four samples) must rise: Theil–Sen and Mann–Kendall over the last
//     6, 9, 12 … floors, and from each third of them to the next by more than the
//     sampling phase can explain — which no healthy floor and no one-off step
//     can do — and after the biggest rise one cache fill can make, the floors
//     must go on rising: a fill rises once, a leak keeps rising. It catches
//     slow leaks, leaks retained only at GC (the teeth keep their slope), and
//     pods with too little history for the jump.
//
// A series without a sawtooth gives no evidence (2 or 4) while its newest point
// is below the highest point before its last drop, for a while after that drop
// even once it has left the history (beenHere, sustain.go): a GC period a
// little shorter than the sampling interval is sampled a little later in its
// cycle every time, and climbs the tooth for minutes before it wraps.
//
// Each pod is judged on its own history, so one leaking pod of many is found as
// fast as a single one.
const (
	// dropFrac: a fall of more than 15 % between two samples is a GC (or a
	// scrape dip, see clean). Young collections free far more; noise far less.
	dropFrac = 0.15
	// gapFactor: samples further apart than 2.5 intervals are in different
	// blocks: a GC may hide in the gap.
	gapFactor = 2.5
	// chunkPoints splits long blocks (a series without GCs) into chunks, so
	// their spread is comparable.
	chunkPoints = 7
	// minFloors: the floor evidence needs six floors (six GC cycles): three
	// thirds of two. Mann–Kendall reaches p < 0.01 on six points only if they all
	// rise; with the whole 16-minute history (about 16 floors) it has more power
	// and the thirds are medians of five.
	minFloors = 6
	// floorChunk: without GCs, the level of every four points (a minute at 15 s).
	floorChunk = 4
	// floorSigmas: the floor's rise must clear six noise standard deviations on
	// top of the sampling-phase width.
	floorSigmas = 6
	// maxJumpShare: no single rise from one floor to the next may make 40 %
	// of the trend's rise over the window. A leak rises cycle after cycle; a
	// cache filled over a GC or two rises in one or two jumps, which with the
	// sampling phase's scatter around them can pass the other tests.
	maxJumpShare = 0.4
	// minAfterFill: the floors after a window's biggest fill are judged
	// (risesAfterFill) when there are four of them or more; fewer are too
	// few for a slope against the sampling phase's scatter.
	minAfterFill = 4
	// pLevel is the one-sided Mann–Kendall significance level.
	pLevel = 0.01
	// spikeRise: a step more than twice the typical rise (plus 5 % of the level)
	// is not the allocation ramp; if it is undone at once it was a spike.
	spikeRise = 2
	// rampPoints: the ramp evidence tests the last 6, 8 and 10 points (90 to
	// 150 s at 15 s): six points that all rise give p = 0.004.
	rampPoints = 6
	// minRampRef: and needs eight points before them to know the level.
	minRampRef = 8
)

// workspace holds the buffers of one evaluation; it is reused across calls.
type workspace struct {
	t, y, ct, cy, ft, fy []float64
	a, b, c, d           []float64
	block, chunk         []int32
	th                   []tooth
	// prior is the drop remembered from earlier histories (the caller sets
	// it, PodTrack.Drop); drop is the last one in this history (prepare).
	prior, drop drop
}

// verdict is the outcome of one evaluation of a pod's history.
type verdict struct {
	breach bool
	// slope is the growth estimate in bytes per second.
	slope float64
	// kind is the evidence that tripped.
	kind evidence
	// floorNow and floorRef are the newest floor and the reference floors'
	// median (jump) or the newest and the reference level (ramp), bytes; sigmas
	// is their distance in noise standard deviations.
	floorNow, floorRef, sigmas float64
}

// evidence names the piece of evidence behind a verdict.
type evidence int

const (
	evidenceJump evidence = iota + 1
	evidenceRamp
	evidenceTrend
	evidenceRise
	evidenceSustain
)

// reference summarises the within-cycle slopes (bytes per second) of a stretch of
// history.
type reference struct {
	// rate is the median within-cycle slope: the allocation rate of a sawtooth,
	// the drift of a flat series.
	rate float64
	// spread is the range of the per-chunk median slopes: how much the pod's
	// allocation rate moves from one GC cycle to the next.
	spread float64
	// noise is the robust standard deviation of a single slope: measurement
	// noise; lowNoise is the same from the points in the lower half of the
	// levels, where the floors are (noise is often relative to the level).
	noise, lowNoise float64
	// chunkSD is the robust standard deviation of the per-chunk median slopes.
	chunkSD float64
	// chunks counts the chunks with two steps or more, of all.
	chunks, all int
}

// assess evaluates the growth rule on a pod's history: t in seconds, y in bytes,
// oldest first. theta is the growth limit in bytes per second.
func (w *workspace) assess(t, y []float64, theta float64) verdict {
	w.prepare(t, y)
	n := len(w.cy)
	if n < minFloors {
		return verdict{}
	}
	// More than one point in ten "spikes" is not a clean series with rare bad
	// scrapes but a sawtooth sampled too slowly for its teeth: GC every few
	// seconds at a 10–15 s interval (a small heap), or every 20–30 s, leaves
	// points at unrelated phases of their cycles, alternating high and low.
	// Its lower envelope is the heap after GC, give or take part of a cycle's
	// allocation: it is judged as a series without GCs would be, by the ramp.
	if 10*(len(y)-n) > len(y) {
		// Only the ramp: the envelope's phase scatter is not the noise the
		// floor trend's margins are made of.
		w.envelope(t, y)
		w.segment(w.spacing())
		v, _ := w.rampEvidence(theta)
		return v
	}
	spacing := w.spacing()
	sawtooth := w.segment(spacing) >= 2
	if sawtooth {
		if v, ok := w.jumpEvidence(spacing, theta); ok {
			return v
		}
		if v, ok := w.riseEvidence(spacing, theta); ok {
			return v
		}
	} else if w.beenHere(theta) {
		// A series without GCs that has already been this high and fallen
		// back: no evidence of growth yet (sustain.go, beenHere).
		return verdict{}
	} else if v, ok := w.rampEvidence(theta); ok {
		return v
	} else if v, ok := w.sustainEvidence(theta); ok {
		return v
	}
	if ok, s := w.floorEvidence(sawtooth, spacing, theta); ok {
		return verdict{breach: true, slope: s, kind: evidenceTrend}
	}
	return verdict{}
}

// prepare cleans the history (t, y) into ct, cy and finds its last drop: what
// every evaluation starts from, and all that recording needs.
func (w *workspace) prepare(t, y []float64) {
	w.clean(t, y)
	w.drop = w.lastDrop()
}

// envelope copies the lower envelope of the history into ct, cy: the least
// of each point and the one before it (the first point alone), at the later
// point's time. Two points of a sawtooth sampled at unrelated phases miss the
// bottom of their cycles by less than one point does.
func (w *workspace) envelope(t, y []float64) {
	w.ct, w.cy = w.ct[:0], w.cy[:0]
	for i := range y {
		v := y[i]
		if i > 0 {
			v = math.Min(v, y[i-1])
		}
		w.ct, w.cy = append(w.ct, t[i]), append(w.cy, v)
	}
}

func isDrop(before, after float64) bool { return after < before*(1-dropFrac) }

// clean copies the history into ct, cy without single-scrape spikes. A point is
// a spike when the series jumps to it and straight back: a rise that the next
// sample undoes by a "GC" that does not go below the point before the rise (or a
// rise abnormally fast), or a fall that the next sample climbs back from to the
// point before the fall (or climbs from abnormally fast). A true GC falls below
// the sample before its peak, and its trough rises at the allocation rate. The
// newest point cannot be judged yet; the medians downstream absorb it until the
// next sample arrives.
func (w *workspace) clean(t, y []float64) {
	rises := w.a[:0]
	for i := 1; i < len(y); i++ {
		if y[i] > y[i-1] {
			rises = append(rises, (y[i]-y[i-1])/(t[i]-t[i-1]))
		}
	}
	typical := median(rises) // NaN when nothing rose: no step is then "big"
	// big: the rise from (t0, y0) to (t1, y1) is abnormally fast.
	big := func(t0, y0, t1, y1 float64) bool {
		return y1-y0 > spikeRise*typical*(t1-t0)+0.05*y0
	}
	w.ct, w.cy = w.ct[:0], w.cy[:0]
	for i := range y {
		if k := len(w.cy); k > 0 && i < len(y)-1 {
			// a is the last point kept, so a spike is judged against the
			// series without the spike before it.
			ta, a, m, c := w.ct[k-1], w.cy[k-1], y[i], y[i+1]
			up := isDrop(m, c) && (c >= a || big(ta, a, t[i], m))
			down := isDrop(a, m) && (c >= a || big(t[i], m, t[i+1], c))
			if up || down {
				continue
			}
		}
		w.ct, w.cy = append(w.ct, t[i]), append(w.cy, y[i])
	}
}

// spacing is the median time between points.
func (w *workspace) spacing() float64 {
	d := w.a[:0]
	for i := 1; i < len(w.ct); i++ {
		d = append(d, w.ct[i]-w.ct[i-1])
	}
	return median(d)
}

// segment numbers the GC cycles (blocks: a new one after each drop or gap) and
// the chunks (blocks cut to chunkPoints points). It returns the number of drops.
func (w *workspace) segment(spacing float64) int {
	w.block, w.chunk = w.block[:0], w.chunk[:0]
	var block, chunk int32
	drops, size := 0, 0
	for i := range w.cy {
		if i > 0 {
			drop := isDrop(w.cy[i-1], w.cy[i])
			if drop {
				drops++
			}
			if drop || w.ct[i]-w.ct[i-1] > gapFactor*spacing {
				block, chunk, size = block+1, chunk+1, 0
			} else if size == chunkPoints {
				chunk, size = chunk+1, 0
			}
		}
		w.block, w.chunk = append(w.block, block), append(w.chunk, chunk)
		size++
	}
	return drops
}

// reference summarises the within-chunk slopes of the points [lo, hi).
func (w *workspace) reference(lo, hi int) (r reference) {
	level := median(append(w.d[:0], w.cy[lo:hi]...))
	all, diffs, meds := w.a[:0], w.b[:0], w.c[:0]
	lowDiffs := 0
	for i := lo; i < hi; {
		j, start := i, len(all)
		for j < hi && w.chunk[j] == w.chunk[i] {
			if j > i {
				all = append(all, (w.cy[j]-w.cy[j-1])/(w.ct[j]-w.ct[j-1]))
				if k := len(all); k-start >= 2 {
					d := math.Abs(all[k-1] - all[k-2])
					if w.cy[j-1] <= level {
						// Low diffs first, so both medians come from one buffer.
						diffs = append(diffs, 0)
						copy(diffs[lowDiffs+1:], diffs[lowDiffs:])
						diffs[lowDiffs] = d
						lowDiffs++
					} else {
						diffs = append(diffs, d)
					}
				}
			}
			j++
		}
		if k := all[start:]; len(k) >= 2 {
			meds = append(meds, median(append(w.d[:0], k...)))
		}
		i = j
		r.all++
	}
	// Consecutive slopes s1, s2 of one cycle share a point, so with value noise
	// s2 − s1 has three times the variance of one slope: the noise of a single
	// slope is the robust spread of |s2 − s1| divided by √3. Unlike deviations
	// from a chunk's own median, this does not shrink with short chunks.
	r.chunks, r.rate = len(meds), median(all)
	r.lowNoise = 1.4826 * median(diffs[:lowDiffs]) / math.Sqrt(3)
	r.noise = 1.4826 * median(diffs) / math.Sqrt(3)
	if len(meds) > 0 {
		lo, hi := meds[0], meds[0]
		for _, m := range meds {
			lo, hi = math.Min(lo, m), math.Max(hi, m)
		}
		r.spread = hi - lo
		c := median(meds)
		for i, m := range meds {
			meds[i] = math.Abs(m - c)
		}
		r.chunkSD = 1.4826 * median(meds)
	}
	return r
}

// floorEvidence tests the heap after GC: the first point of each GC cycle (for a
// series without GCs, the median of each floorChunk points). Over the last k
// floors, for k = 6, 9, 12 … up to all of them (a leak that began recently is a
// hinge in a long history, so the newest floors are tested alone too), the
// floors must rise (Theil–Sen slope above theta, Mann–Kendall p < pLevel), and
// the median floor of each third must be above the previous third's by more
// than the sampling-phase width plus noise. The first sample after a GC lands
// anywhere in the first interval of the cycle, so a cycle's floor is known only
// to within one interval's allocation: no healthy median can move by more than
// that, and a one-off step moves only one of the two differences. This catches
// leaks that do not steepen the teeth, within about six GC cycles when each
// cycle retains more than the phase width. Both halves of the window must rise
// on their own, no single jump may make most of the rise (maxJumpShare), and
// the floors after the biggest rise a cache fill can make must go on rising
// (risesAfterFill).
func (w *workspace) floorEvidence(sawtooth bool, spacing, theta float64) (bool, float64) {
	ft, fy, lead := w.floors(sawtooth, spacing)
	margin, fill := math.NaN(), 0
	for k := minFloors; k <= len(fy); k += 3 {
		if k+3 > len(fy) {
			k = len(fy) // the last window takes every floor
		}
		slope, rise, ok := w.floorTrend(ft[len(ft)-k:], fy[len(fy)-k:], theta)
		if !ok {
			continue
		}
		if math.IsNaN(margin) { // computed once, and only when needed
			margin = w.floorMargin(sawtooth, spacing, lead)
			fill = fillFloors(ft, w.d)
		}
		wt, wy := ft[len(ft)-k:], fy[len(fy)-k:]
		if !(rise > margin && w.halvesRise(wt, wy) > margin && biggestJump(wy) < maxJumpShare*slope*(wt[k-1]-wt[0])) {
			continue
		}
		filled, at := biggestFill(wy, fill)
		if w.risesAfterFill(wt, wy, at, slope, margin) && (!sawtooth || w.trendBeyondFill(wt, wy, filled, at, theta)) {
			return true, slope
		}
	}
	return false, 0
}

// floorTrend tests one window of floors: ok when the thirds rise, the Theil–Sen
// slope exceeds theta and Mann–Kendall finds the trend; rise is the smaller of
// the two rises between successive thirds' medians.
func (w *workspace) floorTrend(ft, fy []float64, theta float64) (slope, rise float64, ok bool) {
	// Cheapest first: the thirds must at least rise, which a flat floor does one
	// time in six.
	k := len(fy) / 3
	first := median(append(w.a[:0], fy[:k]...))
	mid := median(append(w.a[:0], fy[k:len(fy)-k]...))
	last := median(append(w.a[:0], fy[len(fy)-k:]...))
	if !(mid > first && last > mid) {
		return 0, 0, false
	}
	slope, _ = theilSen(ft, fy, nil, w.a)
	if !(slope > theta) || mannKendallP(fy, w.a) >= pLevel {
		return 0, 0, false
	}
	return slope, math.Min(mid-first, last-mid), true
}

// biggestJump is the largest rise from one floor to the next.
func biggestJump(fy []float64) float64 {
	b := 0.0
	for i := 1; i < len(fy); i++ {
		b = math.Max(b, fy[i]-fy[i-1])
	}
	return b
}

// halvesRise is the smaller of the rises of the window's two halves, each
// its Theil–Sen slope times its span. Both halves must rise on their own by
// more than the margin: one step (a cache filled at once) anywhere in the
// window leaves at least one half flat, and a step inside the middle third
// would otherwise split into two rises of the thirds.
func (w *workspace) halvesRise(ft, fy []float64) float64 {
	h := (len(fy) + 1) / 2
	s1, _ := theilSen(ft[:h], fy[:h], nil, w.a)
	s2, _ := theilSen(ft[len(ft)-h:], fy[len(fy)-h:], nil, w.a)
	return math.Min(s1*(ft[h-1]-ft[0]), s2*(ft[len(ft)-1]-ft[len(ft)-h]))
}

// floorMargin is what a rise between thirds must exceed: the sampling-phase
// width — the most a cycle's first sample can sit above its floor, the fastest
// cycle's allocation over the longest interval before a floor — plus noise.
func (w *workspace) floorMargin(sawtooth bool, spacing, lead float64) float64 {
	ref := w.reference(0, len(w.cy))
	phase := 0.0
	if sawtooth && ref.rate > 0 {
		phase = (ref.rate + ref.spread) * lead
	}
	return phase + floorSigmas*ref.noise*spacing/math.Sqrt2
}

// floors lists the floor points: for a sawtooth, the first point of each cycle
// that began with a GC drop right after the previous sample (after a gap or a
// missed sample the first point may be well up the ramp); otherwise the median
// of each floorChunk points. It also returns the longest interval before a
// sawtooth floor.
func (w *workspace) floors(sawtooth bool, spacing float64) ([]float64, []float64, float64) {
	ft, fy, lead := w.ft[:0], w.fy[:0], 0.0
	for i := 0; i < len(w.cy); {
		j, low := i, i
		for j < len(w.cy) && w.block[j] == w.block[i] && (sawtooth || j-i < floorChunk) {
			if w.cy[j] < w.cy[low] {
				low = j
			}
			j++
		}
		switch {
		case !sawtooth:
			// The level of the chunk: its median, which heavy-tailed noise
			// moves far less than its minimum.
			ft = append(ft, (w.ct[i]+w.ct[j-1])/2)
			fy = append(fy, median(append(w.d[:0], w.cy[i:j]...)))
		case i > 0 && isDrop(w.cy[i-1], w.cy[i]) && w.ct[i]-w.ct[i-1] < 1.5*spacing:
			ft, fy = append(ft, w.ct[i]), append(fy, w.cy[i])
			lead = math.Max(lead, w.ct[i]-w.ct[i-1])
		}
		i = j
	}
	w.ft, w.fy = ft, fy
	return ft, fy, lead
}

// fillFloors is how many floors a cache fill can be part-way up: the GCs
// within fillRamp seconds, ⌈fillRamp/P⌉ for the floors' median period P.
func fillFloors(ft, buf []float64) int {
	d := buf[:0]
	for i := 1; i < len(ft); i++ {
		d = append(d, ft[i]-ft[i-1])
	}
	return max(1, int(math.Ceil(fillRamp/median(d))))
}

// trendBeyondFill reports whether the window's floors still trend up faster
// than theta once the biggest rise one cache fill can make (biggestFill:
// filled, ending at floor at) is taken out: the floors from its top on
// are lowered by it (into w.c) and the Theil–Sen slope of the whole window
// is taken again. A leak rises over the rest of the window too; after one
// fill only the sampling phase and the noise move the floors. With GC every
// 120 s ± 10 % sampled every 30 s, a floor is known only to within 0.78 GB,
// and after a 1.6 GB fill part-way at one GC the floors that followed
// drifted up with the phase by 0.56 GB over three cycles, which
// risesAfterFill's margin (that width) allows: one fill was a floor trend of
// +150 MiB/min (0.3 % t3 noise, test/bench/guardrail with seeds shifted by
// 10,000,000); without the fill the window rose by 50 MB/min. Only for a
// sawtooth: that margin is the sampling phase's width, which a series
// without GCs (floors the medians of chunks) does not have, and there one
// fill's rise over fill+1 chunk medians is most of a slow leak's window
// (a Go working set's +200 MB/min: p95 +100–140 s).
func (w *workspace) trendBeyondFill(ft, fy []float64, filled float64, at int, theta float64) bool {
	if at < 0 || !(filled > 0) {
		return true
	}
	adj := append(w.c[:0], fy...)
	for i := at; i < len(adj); i++ {
		adj[i] -= filled
	}
	w.c = adj
	s, _ := theilSen(ft, adj, nil, w.a)
	return s > theta
}

// biggestFill is the biggest rise over fill+1 consecutive floors of fy (as
// much as one cache fill can span, fillFloors) and the index of the floor it
// ends at; -1 when fy has no fill+2 floors.
func biggestFill(fy []float64, fill int) (rise float64, at int) {
	m := fill + 1
	rise, at = math.Inf(-1), -1
	for i := 0; i+m < len(fy); i++ {
		if r := fy[i+m] - fy[i]; r > rise {
			rise, at = r, i+m
		}
	}
	return rise, at
}

// risesAfterFill reports whether the floors after the window's biggest fill
// go on rising at about the trend's slope. A cache filled over up to fillRamp
// seconds is a step spread over the GCs during its ramp: up to fill =
// ⌈fillRamp/P⌉ floors (P the floors' period) sit part-way up it, so it rises
// over fill+1 consecutive floors and then stays. When a part-way floor is the
// middle one of an odd window it is in both halves, each half rises by part
// of the step, and with the sampling phase drifting up in one of them both
// can clear the margin, while no single rise is big enough for maxJumpShare
// (a 1.5 GB fill over 35 s at GC every 90 s ± 10 %, 0.3 % noise,
// test/bench/guardrail, was aborted so). A leak keeps rising after any of
// its spans: the floors from at, where the biggest fill ends (when at
// least minAfterFill of them follow it) must rise, by their Theil–Sen slope
// over their span, to within the margin of what the trend's slope makes of
// that span. After a fill they stay flat, short of it by the fill's share of
// the trend.
func (w *workspace) risesAfterFill(ft, fy []float64, at int, slope, margin float64) bool {
	if at < 0 || len(fy)-at < minAfterFill {
		return true
	}
	s, _ := theilSen(ft[at:], fy[at:], nil, w.a)
	span := ft[len(ft)-1] - ft[at]
	return s*span > slope*span-margin
}
