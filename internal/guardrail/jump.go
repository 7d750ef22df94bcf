package guardrail

import "math"

// The fast evidence: a jump of the heap after GC.
//
// A leak raises the live set: the heap after each GC (the floor) climbs by the
// leak's rate times the GC period, +700 MB a cycle in the seed story, while a
// healthy pod's floor stays within a band it shows in its own history. What
// the band is depends on the pod and on the sampling: the first sample after a
// GC lands somewhere in the first interval of the new cycle, so with GC periods
// that drift against the sampling interval the floors spread over one
// interval's allocation (675 MB at 15 s in the seed story), while with a GC
// period that is an exact multiple of the interval (aliasing) they sit at the
// same phase and spread only by the noise. Learning the band from the pod's own
// floors gives the test the power the evidence has: a few hundred MB above a
// tight band trips it, a wide band needs more.
//
// All of these must hold, each against a different healthy pattern:
//   - the newest floor is above the band of the reference floors (all but the
//     newest two cycles) by more than the extra allocation of the newest teeth
//     over one sampling interval, plus jumpSigmas noise standard deviations.
//     The allowance keeps a toggle that only allocates more (the teeth steepen,
//     the first sample after a GC sits higher up a steeper tooth) out;
//   - the teeth of the newest two cycles climb faster than the reference teeth,
//     by more than their noise and cycle-to-cycle spread and by more than the
//     growth limit: retained growth adds to the allocation slope as long as it
//     lasts. A cache that fills at once (a step) raises the floor but not the
//     slope, and its rise is one abnormally big step, which is left out;
//   - the floor's rise is no larger than what the faster teeth can explain
//     since the reference: a step of gigabytes with slightly faster teeth is
//     a step;
//   - once the newest cycle has steps of its own, they carry part of the
//     extra slope too: a leak steepens every tooth, a cache filled over the
//     previous cycle only that one;
//   - reference floors that rise consistently, at up to the growth limit,
//     are judged where that creep has taken them by the newest floor's time
//     (creep): an old generation filling under the limit is not a jump;
//   - the band's top is at least the highest of the newest reference floors:
//     after a step or a fill inside the reference, the floor sits at its new
//     level, which the band of all the floors (and its physical bound) puts
//     lower;
//   - a step of the live set about as big as a GC's drop hides that GC (the
//     drop falls short of dropFrac, two cycles make one block): the floor
//     after the hidden GC counts as a reference floor for the band's top and
//     as the previous cycle's floor (hiddenFloor);
//   - a floor sampled later in its cycle than the reference floors (GC
//     period a multiple of the interval, the usual floor sample landing just
//     before a GC) is allowed the allocation over that lag (phaseLag);
//   - the newest floor is above the previous cycle's floor by at least what
//     the extra slope's lower bound (extra − allowSigmas teeth σ) retains
//     between them, less the sampling phase's width (the two first samples
//     sit at different points of their cycles' first interval) and
//     jumpSigmas σ of the two floors' noise. A leak lifts every floor by what
//     it retained since the one before; a step of the live set at the GC
//     before the previous cycle lifts the previous floor as much as the
//     newest, and between the two the floor stays or falls back with the
//     phase. Without it such a step passed whenever the raised teeth —
//     noisier at their higher level than the reference's noise says (noise
//     is relative to the level) — came out steeper by chance: a 1.5 GB step
//     at a GC every 90 s ± 10 %, 2 % noise, test/bench/guardrail. (Scaling
//     the teeth's noise by their level instead rejects it too, but delays
//     real leaks, whose teeth sit higher as well, by up to minutes at 2–3 %
//     noise.)
//
// Leaks that retain only at GC (the teeth keep their slope), slow leaks and
// pods without enough history are left to the floor trend (growth.go).
const (
	// minRefTeeth: the band needs five reference floors.
	minRefTeeth = 5
	// jumpSigmas: the newest floor must clear the band by four noise
	// standard deviations (measured at the floor's level).
	jumpSigmas = 4
	// teethSigmas: the newest teeth must be steeper than the reference by this
	// many standard deviations of their median slope. Alone it would be weak;
	// it only has to tell a leak from a step that already cleared the floor test.
	teethSigmas = 4
	// minNoise is the least noise assumed, relative to the level.
	minNoise = 0.001
	// allowSigmas: the allowance for faster allocation over the interval
	// before a floor takes the teeth's extra slope plus two of its standard
	// deviations.
	allowSigmas = 2
	// relMin: and steeper by 15 % of the allocation rate at least. A leak
	// whose floor rises by 20 % of the sawtooth's amplitude per cycle steepens
	// the teeth by 20 %; allocation varies by a few percent from cycle to
	// cycle. Slower leaks are left to the floor trend.
	relMin = 0.15
	// recentFloors: the band's top is at least the highest of the newest three
	// reference floors.
	recentFloors = 3
	// curShare: the newest cycle's own steps must show about a third of the
	// extra slope (their median; one or two steps are noisy). Half cost the
	// seed story at 1 % noise 25 s at p95; a quarter let a heavy-tailed
	// cache fill through (test/bench/guardrail).
	curShare = 0.35
	// consistency: the floor may have risen at most as much as the teeth's
	// extra slope explains since the newest reference floor: a step of a
	// gigabyte with slightly faster teeth is a step.
	consistency = 1.0
)

// tooth is one GC cycle of the cleaned history: points [lo, hi).
type tooth struct {
	lo, hi int
	// floor: the cycle began with a GC drop right after the previous sample,
	// so its first point is a floor known to within one interval's allocation.
	floor bool
	// gap is the time from the previous point to the first one, seconds.
	gap float64
}

// teeth lists the GC cycles (blocks) of the cleaned history.
func (w *workspace) teeth(spacing float64) []tooth {
	th := w.th[:0]
	for i := 0; i < len(w.cy); {
		j := i + 1
		for j < len(w.cy) && w.block[j] == w.block[i] {
			j++
		}
		x := tooth{lo: i, hi: j}
		if i > 0 {
			x.gap = w.ct[i] - w.ct[i-1]
			x.floor = isDrop(w.cy[i-1], w.cy[i]) && x.gap < 1.5*spacing
		}
		th = append(th, x)
		i = j
	}
	w.th = th
	return th
}

// band is the level of the reference floors: their median, and the top of
// the band healthy floors stay in. It reorders fy.
//
// The top is the higher of m + 2·(q75 − m) (the top of a uniform spread, 1.35
// standard deviations of a normal one) and the second highest floor, raised
// by nine times the floors' range over their count: when the floors spread
// over the sampling phase (uniformly), a dozen of them can miss the top of
// that spread, and a new one lands above the highest of n with probability
// 1/(n+1), by a fraction of the range that is below 9/n with probability
// e^-9. It is capped at the physical bound (physicalBound). With aliased
// sampling the floors sit at one phase, their range is the noise, and the
// band stays tight.
func band(fy []float64, bound float64) (m, top float64) {
	m = median(fy)
	n := len(fy)
	q75 := nth(fy, (3*n)/4)
	second := nth(fy, n-2)
	lowest := nth(fy, 0)
	top = math.Max(m+2*(q75-m), second) + 9*(nth(fy, n-1)-lowest)/float64(n)
	return m, math.Min(top, bound)
}

// physicalBound is as high as a floor sampled gap seconds after the GC before
// it can sit: the second lowest reference floor plus the fastest reference
// allocation over the gap (the first sample after a GC cannot sit further up
// its cycle). The band's top and the allowance for a floor sampled late in
// its cycle (phaseLag) both stop at it. fy must be in time order.
//
// The floor it starts from is the second lowest of the newer two thirds of
// the floors: a floor that rises under the growth limit (an old generation
// filling as the load rises) leaves its oldest floors below where it now is.
// From all the floors, the bound came from floors 10–12 minutes old, and a
// healthy pod's newest floor, sampled late in its interval on teeth steepened
// by the load, cleared it by a few tens of MB more than the jump asks
// (internal/guardrail/edensim, 30 MB promoted per collection: 2 aborts in
// 21,600 pod-hours, test/bench/guardrail TestCreepingOldGeneration). For a
// flat floor the newer two thirds' second lowest is a little higher than all
// the floors' (about 7 % of the phase's spread, 45 MB in the seed story):
// leaks at p95 up to 44 s later in a few cells, most within 10 s (README,
// "An independent heap model").
func physicalBound(fy []float64, r reference, gap float64) float64 {
	return secondLowest(fy[len(fy)/3:]) + (r.rate+2*r.chunkSD)*gap
}

// secondLowest is the second smallest of v (+Inf with fewer than two).
func secondLowest(v []float64) float64 {
	a, b := math.Inf(1), math.Inf(1)
	for _, x := range v {
		switch {
		case x < a:
			a, b = x, a
		case x < b:
			b = x
		}
	}
	return b
}

// jumpEvidence tests the newest GC cycle's floor against the pod's reference.
func (w *workspace) jumpEvidence(spacing, theta float64) (verdict, bool) {
	th := w.teeth(spacing)
	k := len(th) - 1
	if k < minRefTeeth+1 || !th[k].floor {
		return verdict{}, false
	}
	fy, ft, newest := w.fy[:0], w.ft[:0], math.NaN()
	for _, x := range th[:k-1] {
		if x.floor {
			fy, ft, newest = append(fy, w.cy[x.lo]), append(ft, w.ct[x.lo]), w.ct[x.lo]
		}
	}
	w.fy, w.ft = fy, ft
	if len(fy) < minRefTeeth {
		return verdict{}, false
	}
	period := w.floorPeriod(ft)
	lag := w.phaseLag(ft, period, w.ct[th[k].lo], spacing)
	ref := w.reference(0, th[k-1].lo)
	if ref.chunks < minRefTeeth || !(ref.rate > 0) {
		return verdict{}, false
	}
	// The steps of the newest two cycles, without abnormally big ones (a step
	// of the live set, a spike the cleaning could not judge yet).
	steps := w.steps(th[k-1].lo, len(w.cy), -1, ref.rate)
	if len(steps) < 2 {
		return verdict{}, false
	}
	n := len(steps)
	extra := hodgesLehmann(steps, w.a) - ref.rate
	cur := th[k]
	y, t := w.cy[cur.lo], w.ct[cur.lo]
	// Reference floors that have been creeping up are judged where their
	// creep has taken them by now (creep).
	if c := w.creep(ft, fy, theta); c > 0 {
		for i := range fy {
			fy[i] += c * (t - ft[i])
		}
	}
	// The newest reference floors bound the band from below: after a step or
	// a cache fill inside the reference the pod's floor sits at its new level,
	// which the band of all the floors (and its physical bound) can put
	// lower.
	recent := 0.0
	for _, v := range fy[max(0, len(fy)-recentFloors):] {
		recent = math.Max(recent, v)
	}
	// So does the floor a step hid in a newest reference cycle (hiddenFloor).
	for _, x := range th[max(0, k-1-recentFloors) : k-1] {
		if v, _, ok := w.hiddenFloor(x, period); ok {
			recent = math.Max(recent, v)
		}
	}
	bound := physicalBound(fy, ref, cur.gap)
	m, top := band(fy, bound)
	top = math.Max(top, recent)
	// A metrics source without noise (a synthetic one) still has the KiB
	// resolution of the history and real ones some rounding: 0.1 % of the
	// floor is the least noise assumed.
	sigma := math.Max(ref.lowNoise*spacing/math.Sqrt2, minNoise*m)
	// The null's spread from a dozen pairs can come out low by chance; the
	// noise of a median of n steps and the spread of single cycles' slopes
	// (over the two cycles tested) bound it from below.
	teethNoise := math.Max(w.teethNoise(th[:k-1], n, ref.rate),
		math.Max(ref.noise*math.Sqrt(math.Pi/3/float64(n)), ref.chunkSD/math.Sqrt2))
	// A floor sampled lag seconds later in its cycle than the reference
	// floors were sits that much further up a tooth of the faster slope: the
	// band's top is at least the reference floors' median raised by that,
	// and at most the physical bound (no first sample after a GC sits more
	// than its gap up its cycle). A band that already spreads over the
	// sampling phase is at that bound and does not move.
	if lag > 0 {
		top = math.Max(top, math.Min(m+(ref.rate+math.Max(extra+allowSigmas*teethNoise, 0))*lag, bound))
	}
	// The allowance for faster allocation uses the extra slope's upper
	// bound: an underestimate would let a toggle that allocates 30 % more
	// through.
	excess := y - top - math.Max(extra+allowSigmas*teethNoise, 0)*cur.gap
	if !(excess > jumpSigmas*sigma) || !((y-top)/(t-newest) > theta) {
		return verdict{}, false
	}
	if !(extra > teethSigmas*teethNoise && extra > theta && extra > relMin*ref.rate) || excess > consistency*extra*(t-newest) {
		return verdict{}, false
	}
	// A leak lifts the newest floor above the previous cycle's by what the
	// faster teeth retained in between; a step of the live set at the GC
	// before the previous cycle lifts both floors alike.
	if prev := th[k-1]; prev.floor {
		py, pt := w.cy[prev.lo], w.ct[prev.lo]
		// A leak lifts the newest floor above a floor a step hid in the
		// previous block too, a step does not.
		if v, vt, ok := w.hiddenFloor(prev, period); ok {
			py, pt = v, vt
		}
		phase := (ref.rate + 2*ref.chunkSD) * math.Max(cur.gap, prev.gap)
		if y-py < (extra-allowSigmas*teethNoise)*(t-pt)-phase-jumpSigmas*math.Sqrt2*sigma {
			return verdict{}, false
		}
	}
	// Once the newest cycle has steps of its own, they must carry part of the
	// extra slope too: a leak steepens every tooth, while a cache filled over
	// the previous cycle steepened that one only and left the floor raised.
	if cur := w.steps(cur.lo, len(w.cy), -1, ref.rate); len(cur) > 0 && !(median(cur)-ref.rate > curShare*extra) {
		return verdict{}, false
	}
	return verdict{breach: true, slope: extra, kind: evidenceJump, floorNow: y, floorRef: m, sigmas: (y - m) / sigma}, true
}

// creepLevel: the reference floors creep when they rise with a one-sided
// Mann–Kendall p below it.
const creepLevel = 0.05

// creep is the rate at which the reference floors (at ft, fy) rise, when
// they rise consistently (creepLevel): their Theil–Sen slope, at most the
// growth limit theta; 0 when they do not. A healthy JVM's floor may climb for
// many cycles at a rate the limit allows — a G1 old generation filling with
// what the young collections promote, until mixed collections reclaim it —
// and judged against the band of floors from ten minutes earlier, its newest
// floor stood hundreds of MB above it; with the teeth steeper as the load
// rose, that was a jump (internal/guardrail/edensim, 30 MB promoted per
// collection: 8 aborts in 21,600 healthy pod-hours, test/bench/guardrail
// TestIndependentHeapModel). Growth up to theta is what the rule allows, so
// the band follows it up to that rate; a leak's floors rise only from its
// onset, after the reference.
func (w *workspace) creep(ft, fy []float64, theta float64) float64 {
	if mannKendallP(fy, w.a) >= creepLevel {
		return 0
	}
	s, _ := theilSen(ft, fy, nil, w.a)
	return math.Min(math.Max(s, 0), theta)
}

// phaseLag is how many seconds later in its GC cycle the floor at t was
// sampled than the reference floors at ft (period apart: floorPeriod) were,
// when they all sit at one phase of their cycles; 0 when it is within scrape
// jitter (a quarter interval) of theirs, earlier, or when the reference
// floors sit at no common phase.
//
// With a GC period that is a multiple of the interval, every floor is the
// first sample after its GC at the same phase, and the band of the floors is
// as tight as the noise — which is the jump's power there. But when that
// phase is near 0, scrape jitter (or a late GC) now and then puts the sample
// that is usually the floor just before the GC instead of after it: the
// cycle's first sample is then the next one, a whole interval further up its
// tooth, higher by one interval's allocation (675 MB in the seed story). With
// the teeth steeper — a toggle that only allocates 10–30 % more — that floor
// was a jump (GC exactly every 60 s, 15 s samples, t3 noise,
// test/bench/guardrail with seeds shifted by 5,000,000). The floor's time
// says so: it comes lag ≈ one interval later than the reference floors'
// phase (t − f is the period's multiple plus lag for every reference floor
// f), and a leak's floor, sampled at the usual phase, has lag ≈ 0. The lag is
// the median over the reference floors (a reference floor that was itself
// sampled late does not move it); it counts only when the reference floors
// agree on it to within a quarter interval (median absolute deviation). With
// GC periods that drift against the sampling they mostly do not; when they
// do (the GCs drifted within one interval over the reference), a floor an
// interval late may still sit up to an interval higher in its cycle, and the
// caller caps the allowance at the physical bound, which a band spread over
// the phase already reaches. Measured cost (make bench-guardrail at seed
// offsets 0, 5,000,000 and 10,000,000): up to 14 s at p50 in a few drifting
// cells at 3 % noise, at most 4 s at p95.
func (w *workspace) phaseLag(ft []float64, period, t, spacing float64) float64 {
	if !(period > 0) {
		return 0
	}
	d := w.d[:0]
	for _, f := range ft {
		x := t - f
		d = append(d, x-period*math.Round(x/period))
	}
	lag := median(d)
	for i, v := range d {
		d[i] = math.Abs(v - lag)
	}
	if median(d) > spacing/4 || lag <= spacing/4 {
		return 0
	}
	return lag
}

// hiddenFloor is the floor of a GC that a step of the live set hid inside
// the block x: when the step is about as big as the GC's drop, the drop falls
// short of dropFrac and two cycles make one block, spanning two GC periods
// (the reference floors' spacing). The GC's floor is the block's biggest
// fall. Hidden, it kept the band below the step's level, and the previous
// cycle's floor at the level before it: a 1.0–1.7 GB step at a GC exactly
// every 60 s, its raised teeth steeper by chance (3 % t3 noise), was a jump
// (test/bench/guardrail, seeds shifted by 10,000,000). A leak hides no GC:
// its floors rise by a cycle's leak, a fraction of the drop.
func (w *workspace) hiddenFloor(x tooth, period float64) (y, t float64, ok bool) {
	if !(w.ct[x.hi-1]-w.ct[x.lo] > 1.5*period) {
		return 0, 0, false
	}
	fall := math.Inf(1)
	for i := x.lo + 1; i < x.hi; i++ {
		if d := w.cy[i] - w.cy[i-1]; d < fall {
			fall, y, t = d, w.cy[i], w.ct[i]
		}
	}
	return y, t, true
}

// floorPeriod is the GC period the reference floors at ft show: the median
// time between consecutive ones (NaN without two).
func (w *workspace) floorPeriod(ft []float64) float64 {
	if len(ft) < 2 {
		return math.NaN()
	}
	d := w.d[:0]
	for i := 1; i < len(ft); i++ {
		d = append(d, ft[i]-ft[i-1])
	}
	return median(d)
}

// steps appends to w.b the within-cycle slopes of the points [lo, hi), at
// most limit of them (-1: all), without abnormally big ones.
func (w *workspace) steps(lo, hi, limit int, rate float64) []float64 {
	steps := w.b[:0]
	for i := lo + 1; i < hi && len(steps) != limit; i++ {
		dt := w.ct[i] - w.ct[i-1]
		if w.block[i] != w.block[i-1] || w.cy[i]-w.cy[i-1] > spikeRise*rate*dt+0.05*w.cy[i-1] {
			continue
		}
		steps = append(steps, (w.cy[i]-w.cy[i-1])/dt)
	}
	w.b = steps
	return steps
}

// teethNoise is the standard deviation of the teeth statistic — the
// Hodges–Lehmann estimate of n steps of two consecutive cycles, less the reference rate — on the
// reference cycles themselves: each pair of consecutive reference cycles gives
// one value, from their first n steps. That is the statistic's own null
// distribution, with the pod's noise, cycle-to-cycle allocation changes and
// sampling phase in it, whatever their shape. The robust spread (MAD) keeps a
// step in the reference from widening it much.
func (w *workspace) teethNoise(ref []tooth, n int, rate float64) float64 {
	null := w.c[:0]
	for j := 1; j < len(ref); j++ {
		steps := w.steps(ref[j-1].lo, ref[j].hi, n, rate)
		if len(steps) == n {
			null = append(null, hodgesLehmann(steps, w.a)-rate)
		}
	}
	w.c = null
	if len(null) < minRefTeeth {
		return math.NaN()
	}
	c := median(null)
	for i, v := range null {
		null[i] = math.Abs(v - c)
	}
	return 1.4826 * median(null)
}

// rampSteps: each of the ramp's newest five steps must rise by more than half
// the limit plus two standard deviations of the step noise. A cache filled
// over up to a minute rises as steadily as a leak for four or five steps and
// then stops; with ConsecutiveBreaches 3 the ramp must last seven steps, and
// steps of noise alone do not pass.
const rampSteps = 5

// rampEvidence is the fast evidence for a series without GC drops (a Go
// service's working set, a heap sampled too slowly to show its teeth): over
// the last 6, 8 or 10 points the series rises steadily — Mann–Kendall p <
// pLevel and a Theil–Sen slope above theta — its newest third sits above the
// band of the points before by jumpSigmas noise standard deviations, each of
// its newest five steps rises beyond the noise, the newest two keep the
// ramp's pace, and no single step makes half of the rise (which would be a
// cache filled at once).
func (w *workspace) rampEvidence(theta float64) (verdict, bool) {
	n := len(w.cy)
	for k := rampPoints; k <= rampPoints+4; k += 2 {
		lo := n - k
		if lo < minRampRef {
			break
		}
		t, y := w.ct[lo:], w.cy[lo:]
		slope, _ := theilSen(t, y, nil, w.a)
		if !(slope > theta) || mannKendallP(y, w.a) >= pLevel {
			continue
		}
		// Still rising now, step after step: a cache fill over a minute rises
		// steadily too, then stops.
		ref := w.reference(0, lo)
		rising := true
		for j := len(y) - rampSteps; j < len(y); j++ {
			rising = rising && y[j]-y[j-1] > (theta/2+2*ref.noise)*(t[j]-t[j-1])
		}
		// And at the ramp's pace: a leak adds about the same at every step, so
		// the newest two steps together rise by the slope's rise over them,
		// less two standard deviations of their noise (ref.noise times one
		// interval is the noise of a two-step difference: √2 that of a point);
		// a fill that has stopped leaves its newest steps flat. The
		// rising test alone let a fill through: its steps are judged against
		// the reference's noise, and at the raised level the noise is larger
		// (it is relative to the level), so after a 1.4 GB fill over a minute
		// on a 2 GB Go working set two flat steps passed as rising, making the
		// seven rising steps that three breaches in a row ask for (1–2 %
		// noise, test/bench/guardrail with seeds shifted by 5,000,000).
		// Scaling the noise to the level instead rejects it too but delays
		// real ramps (+500 MB/min at 1 % noise: p50 110 → 252 s), whose level
		// rises as well.
		if j := len(y) - 1; !(y[j]-y[j-2] > slope*(t[j]-t[j-2])-2*ref.noise*(t[j]-t[j-1])) {
			continue
		}
		if !rising {
			continue
		}
		biggest := 0.0
		for i := 1; i < len(y); i++ {
			biggest = math.Max(biggest, y[i]-y[i-1])
		}
		if biggest > slope*(t[len(t)-1]-t[0])/2 {
			continue
		}
		m, top := band(append(w.fy[:0], w.cy[:lo]...), math.Inf(1))
		sigma := math.Max(ref.noise*(t[1]-t[0])/math.Sqrt2, minNoise*m)
		last := median(append(w.a[:0], y[len(y)-k/3:]...))
		if !(last-top > jumpSigmas*sigma) {
			continue
		}
		return verdict{breach: true, slope: slope, kind: evidenceRamp, floorNow: last, floorRef: m, sigmas: (last - m) / sigma}, true
	}
	return verdict{}, false
}
