package guardrail

import (
	"math"
	"slices"
)

// The sustained rise: a series without a sawtooth that rises in every stretch
// a cache fill leaves.
//
// A Go service's working set has no GC drops, so its only evidence used to be
// the ramp (jump.go): five rising steps whose newest two keep the pace, which
// at 2–3 % noise rarely lines up (+200 MB/min on a 2 GB working set rises by
// 50 MB a sample against 40–60 MB of noise). A slope fitted over more points
// sees through that noise, but a line through raw points cannot tell a leak
// from a cache fill: a 240 MB fill over a minute is a slope of 240 MB/min
// while it lasts, and a straight line through the step it leaves is steep too.
//
// A fill is a step spread over at most fillRamp seconds. The evidence takes the
// newest sustainWindows points and, for every placement of such a fill in them
// (starting between any two of its points, before the first — its tail in the
// window — or not at all), leaves out the points the fill can be part-way up
// (those after its start and before the next point's time plus fillRamp) and
// fits the rest with one common slope and a level of its own on each side of
// the fill: an ordinary regression on time with a level-shift dummy. The fill's
// step goes into the dummy, the flat stretches on either side give a slope near
// zero, and a fill in progress at the newest point leaves only the flat
// stretch before it. A leak rises in every stretch, so every placement finds
// its slope. It breaches when, at every placement, the slope is more than
// sustainZero standard errors above zero and more than sustainLimit standard
// errors above the growth limit. It is one more way to breach, after the ramp.
//
// The standard error comes from the fit's own residuals, so the noise is
// measured where the slope is (relative noise grows with the level, and the
// reference's noise says less about a raised level) and heavy-tailed noise
// only widens it. The fit is a three-parameter least-squares one in closed
// form: the slope pooled within the two sides (each centred on its own mean),
// which is what the dummy regression gives. gonum's stat.LinearRegression fits
// one line without a level shift, and a general solver (mat's QR) allocates
// at every call, which Observe must not (it runs for every pod at every
// sample); the within-side formula is exact and needs no buffer.
//
// Why not the 90 s for +200 MB/min: at 15 s samples the sixth sample
// after onset comes 75–90 s after it, and the leak has added 250–300 MB in
// steps of 50 MB. A legitimate cache fill of 240 MB over 60 s, started just
// before the first of those samples, rises by 60 MB a sample — faster than the
// leak — over the first four, so up to the sixth sample the two differ only in
// what the fill's minute leaves outside it: the fifth and sixth samples, one
// interval, in which the leak adds 50 MB where the limit allows 26 MB (100
// MiB/min over 15 s). The evidence of a leak at 90 s is thus 24 MB in a single
// difference of two points, against a noise of 28 MB for that difference at
// 1 % (20 MB a point on 2 GB) and 8.5 MB at 0.3 %, with no residual to measure
// that noise by — and three breaches in a row (ConsecutiveBreaches) add two
// more samples. No rule that lets a one-minute fill through can abort there;
// this one, which needs three degrees of freedom outside any fill, aborts
// +200 MB/min at 0.3 % Gaussian noise in p95 181–187 s (test/bench/guardrail,
// five seed sets; 203–222 s with the ramp alone), at 1 % in 243–248 s
// (306–308 s), at 3 % in 398–409 s (504–574 s).
const (
	// sustainZero: the slope's lower bound, in standard errors above zero, at
	// every placement. With a few degrees of freedom the residuals' standard
	// error can come out small by chance; five keeps a flat series with one
	// fill (the slope's estimate about zero) far from it.
	sustainZero = 5
	// sustainLimit: and in standard errors above the growth limit: a live set
	// wandering at up to 60 MB/min (below the 100 MiB/min default limit) has a
	// real slope, which must not pass for growth because it is significant.
	sustainLimit = 2
	// minSustainDF: a placement's fit needs three degrees of freedom (points
	// outside the fill less the fitted levels and slope) for its standard
	// error; a placement with fewer cannot confirm the slope, so the window
	// does not breach.
	minSustainDF = 3
)

// sustainWindows are the window sizes tested, newest points: 10 points (150 s
// at 15 s) leave at least five outside any one-minute fill, enough at low
// noise; longer windows see through 2–3 % noise. A window that reaches back
// before a leak's onset averages the flat stretch into the slope, so short
// windows decide early and long ones only when noise makes short ones too
// weak.
var sustainWindows = [...]int{10, 12, 16, 20, 24, 32}

// sustainEvidence tests the history in ct, cy (see the file comment).
func (w *workspace) sustainEvidence(theta float64) (verdict, bool) {
	score, slope, z := sustainScore(w.ct, w.cy, theta)
	if !(score > 1) {
		return verdict{}, false
	}
	n := len(w.cy)
	return verdict{breach: true, slope: slope, kind: evidenceSustain, floorNow: w.cy[n-1], sigmas: z}, true
}

// beenHere reports whether the newest point of the cleaned history is within
// the range the series has already shown and fallen back from: below the
// highest point before a drop (a fall by dropFrac) that still counts, raised
// by beenHereMargin of that drop's height. A sawtooth whose GC period is a
// little shorter than the sampling interval (or than a divisor of it) is
// sampled a little later in its cycle at every sample: the points climb the whole tooth over many samples —
// a steady rise of hundreds of MB a minute — and fall back to the floor when
// the phase wraps (stroboscopic sampling; GC every 14.5 s ± 3 % sampled every
// 15 s aborted 18 healthy runs of 40 in three hours, test/bench/guardrail
// TestStroboscopicSawtooth). A leak climbs past anything before it; until it
// has, a rise the pod has already made and undone is not evidence of
// retention. assess applies it to every evidence of a series without a
// sawtooth (the ramp, the sustained rise, the trend of its levels). A
// history may also have fallen back from a level slowly, a strobe descending
// its tooth: its deepest slow fall counts like a drop, beside the drops
// (deepestDescent).
//
// A drop vetoes for dropMemory times as long as its height takes at the
// growth limit, whether or not it is still in the history: a climb can take
// longer than the history holds (GC 1 % shorter than 15 s samples wraps every
// 25 minutes), so the drop is remembered after it has left it (PodTrack.Drop,
// also while the baseline is only recorded), and a climb slower than that
// rises at under half the limit on average. With a jittered GC the sampling
// phase wanders, lingers near the wrap and makes small falls there, so a
// later drop replaces the remembered one only when it reaches higher or the
// remembered one no longer counts (counting). Healthy strobes aborted per
// 3,400 pod-hours (offset 0, the history at 10 s): 73 remembered for 1.25
// times as long, 46 for twice, 29 for ever (those left began their climb
// before the recording did, or hover at the wrap long enough to look like a
// sawtooth whose floors climb).
//
// The cost falls on a leak that starts soon after a big cache was evicted:
// it is judged only once it passes the cache's level plus a quarter of the
// eviction, or once the eviction no longer counts (1 GB: 19 minutes; 1.9
// GB: 36), make bench-guardrail prints the table (README, "Stroboscopic
// sampling"). Telling such a cache from a strobe's climb by its shape (a
// climb right before the drop, or a level held before it) let 50–80 strobes
// in 7,000 pod-hours through: near its wrap a strobe's samples hover and
// flip, and look held or flat.
func (w *workspace) beenHere(theta float64) bool {
	y := w.cy[len(w.cy)-1]
	if d, ok := w.counting(theta); ok && y <= d.reach() {
		return true
	}
	f, gradual := w.deepestDescent()
	now := w.ct[len(w.ct)-1]
	allowed := 0.0
	if gradual {
		allowed = theta * (now - f.at)
	}
	return f.counts(now, theta) && y <= f.reach()+allowed
}

// deepestDescent is the history's deepest slow fall: from a point to a later
// one, however many samples it took, with no drop (a fall by dropFrac from one
// sample to the next) between them, when it is deeper than dropFrac of the
// point it fell from; at is the lower point's time, best.ok false when there
// is none. Drops are the rule's own (counting); this is the fall they miss.
// gradual reports whether no step of it carries a quarter of its fall.
//
// A strobe whose GC period is a little longer than the interval is sampled a
// little earlier in its cycle at every sample: it descends its tooth over
// many samples, then jumps back up at the wrap. When the load shortens the
// period below the interval, it climbs the tooth instead. The history then
// holds a climb and, before it, a descent with no sudden drop in it; the
// climb rises at hundreds of MB a minute back to where the descent started
// (the independent heap model, a toggle that allocates 30 % more at GC ~20 s
// sampled every 15 s: 12 aborts in 3,600 pod-hours, test/bench/guardrail
// TestDescendingStrobe). A leak has not fallen back.
//
// Two of those strobes (2–3 % noise) needed more: the history held a small
// wrap's drop as well, which hid the descent while only a history without a
// drop looked for one, and the climbs' tops were higher than the descent's
// start by what the old generation under the tooth had grown (~40 MB/min,
// ~200 MB at every wrap). So a descent counts beside a drop, and a gradual
// one's reach rises at the growth limit from its bottom on: growth under the
// limit is what the rule allows (the seeds 13004081 and 23005900 need both).
// Gradual: no step of it carries a quarter of its fall (gradualStep). A drop's
// reach does not rise, nor does a fall made by one step: a cache evicted at
// 3 % noise falls by less than dropFrac from one sample to the next now and
// then, and a leak soon after it must be judged once it passes the cache's
// level (with the allowance on every descent, a Go working set's +200 MB/min
// 2 minutes after a 0.5 GB eviction took p95 642 s instead of 404 s,
// test/bench/guardrail).
func (w *workspace) deepestDescent() (best drop, gradual bool) {
	top, topAt, dropAt, step := math.Inf(-1), 0, -1, 0.0
	for j, v := range w.cy {
		if j > 0 && isDrop(w.cy[j-1], v) {
			dropAt = j
		}
		if v > top || dropAt > topAt {
			// A new top, or a drop between the top and this point: the fall
			// from the highest point after the drop is what remains a descent.
			top, topAt, step = v, j, 0
			continue
		}
		step = math.Max(step, w.cy[j-1]-v)
		if top-v > best.top-best.bottom && isDrop(top, v) {
			best = drop{top: top, bottom: v, at: w.ct[j], ok: true}
			gradual = step < gradualStep*(top-v)
		}
	}
	return best, gradual
}

// gradualStep: a descent is gradual when none of its steps carries this share
// of its fall. A cache evicted at once falls in one step of its size, so
// noise cannot make it gradual; a strobe's descent falls a little at every
// sample. With a half, a Go working set's 0.5 GB eviction at 3 % noise was
// often gradual (its fall is the step plus the noise's highest and lowest
// reads around it), and a leak 2 minutes after it took
// p95 616 s instead of 404 s; with a fifth, the two strobes this is for
// (TestDescendingStrobe, 2–3 % noise) were not gradual.
const gradualStep = 0.25

// counting is the drop that still counts at the newest point, of the
// history's last one and the remembered one, the one with the higher reach:
// a small fall near the bottom of a strobe's climb (its phase hovering at the
// wrap) does not replace the climb's own drop. ok is false when neither
// counts.
func (w *workspace) counting(theta float64) (best drop, ok bool) {
	now := w.ct[len(w.ct)-1]
	for _, d := range [...]drop{w.drop, w.prior} {
		if d.counts(now, theta) && (!ok || d.reach() > best.reach()) {
			best, ok = d, true
		}
	}
	return best, ok
}

// remember is the drop to keep for later histories: the one that counts, or
// else the history's last (which counts no more, or is none).
func (w *workspace) remember(theta float64) drop {
	if d, ok := w.counting(theta); ok {
		return d
	}
	return w.drop
}

// drop is a fall of the series by more than dropFrac: the highest point before
// it, the point after it, and that point's time on the history's clock.
type drop struct {
	top, bottom, at float64
	ok              bool
}

// counts reports whether the drop still vetoes at now: for dropMemory times
// as long as its height takes at the growth limit theta.
func (d drop) counts(now, theta float64) bool {
	return d.ok && now-d.at <= dropMemory*(d.top-d.bottom)/theta
}

// reach is how high the series may rise again without evidence of growth.
func (d drop) reach() float64 { return d.top + beenHereMargin*(d.top-d.bottom) }

// lastDrop finds the last drop of the cleaned history. When it is the one
// remembered from earlier histories, its top is the higher of the two: points
// before it that have left the history still count.
func (w *workspace) lastDrop() drop {
	for d := len(w.cy) - 1; d > 0; d-- {
		if !isDrop(w.cy[d-1], w.cy[d]) {
			continue
		}
		last := drop{top: slices.Max(w.cy[:d]), bottom: w.cy[d], at: w.ct[d], ok: true}
		if w.prior.ok && math.Abs(w.prior.at-last.at) < 1e-3 {
			last.top = math.Max(last.top, w.prior.top)
		}
		return last
	}
	return drop{}
}

// dropMemory: how long a drop vetoes growth evidence, in times the drop's
// height over the growth limit.
const dropMemory = 2.0

// beenHereMargin: the newest point must clear the top before the last drop by
// a quarter of the drop's height. The top of a stroboscopic climb varies with
// the cycle's allocation (a few percent) and the noise: with a tenth, GC 3–5 %
// shorter than the interval still aborted a few healthy runs per seed set.
const beenHereMargin = 0.25

// sustainScore is the evidence's statistic on the points (t, y), oldest first:
// over the windows, the best of the windows' worst placements, each placement
// scored by how far its slope clears the two bounds (the smaller of z₀ /
// sustainZero and z_θ / sustainLimit, where z₀ is the slope over its standard
// error and z_θ the slope less theta over it). It breaches when the score
// exceeds 1; slope and z (z₀) are those of the deciding window's worst
// placement. A window whose placements cannot all be fitted scores −Inf.
func sustainScore(t, y []float64, theta float64) (score, slope, z float64) {
	score = math.Inf(-1)
	for _, k := range sustainWindows {
		if k > len(y) {
			break
		}
		s, b, z0 := sustainWindow(t[len(t)-k:], y[len(y)-k:], theta)
		if s > score {
			score, slope, z = s, b, z0
		}
	}
	return score, slope, z
}

// sustainWindow scores one window: the worst placement of a fill in it.
func sustainWindow(t, y []float64, theta float64) (score, slope, z float64) {
	n := len(y)
	score = math.Inf(1)
	// i is the last point before the fill starts (-1: it started before the
	// window; n-1: no fill). The points after i and before t[i+1] + fillRamp
	// can be part-way up it; those from then on are after it.
	for i := -1; i < n; i++ {
		end := math.Inf(1)
		if i+1 < n {
			end = t[i+1] + fillRamp
		}
		b, se, df := fitAroundFill(t, y, i, end)
		if df < minSustainDF {
			return math.Inf(-1), 0, 0
		}
		// An exact fit (se = 0) scores ±Inf by its slope's side of the
		// bounds; a flat constant series (0/0) fails.
		s := math.Min(b/se/sustainZero, (b-theta)/se/sustainLimit)
		if math.IsNaN(s) {
			return math.Inf(-1), 0, 0
		}
		if s < score {
			score, slope, z = s, b, b/se
		}
	}
	return score, slope, z
}

// fitAroundFill fits the points of (t, y) up to i (before a fill) and from
// time end on (after it) with one slope and a level for each side, leaving out
// the points in between; it returns the slope, its standard error and the
// residual degrees of freedom. The slope is pooled within the sides:
// Σ(t−t̄)(y−ȳ) / Σ(t−t̄)² with each side centred on its own means.
func fitAroundFill(t, y []float64, i int, end float64) (slope, se float64, df int) {
	var side [2]struct {
		n             int
		t0, y0        float64 // the side's first point, to keep the sums small
		st, sy        float64
		stt, sty, syy float64
	}
	for j := range y {
		s := 0
		switch {
		case j <= i:
		case t[j] >= end:
			s = 1
		default:
			continue // part-way up the fill
		}
		g := &side[s]
		if g.n == 0 {
			g.t0, g.y0 = t[j], y[j]
		}
		dt, dy := t[j]-g.t0, y[j]-g.y0
		g.n++
		g.st, g.sy = g.st+dt, g.sy+dy
		g.stt, g.sty, g.syy = g.stt+dt*dt, g.sty+dt*dy, g.syy+dy*dy
	}
	var sxx, sxy, syy float64
	params := 1 // the slope
	for _, g := range side {
		if g.n == 0 {
			continue
		}
		params++ // the side's level
		m := float64(g.n)
		sxx += g.stt - g.st*g.st/m
		sxy += g.sty - g.st*g.sy/m
		syy += g.syy - g.sy*g.sy/m
	}
	df = side[0].n + side[1].n - params
	if df <= 0 || !(sxx > 0) {
		return 0, 0, max(df, 0)
	}
	slope = sxy / sxx
	rss := math.Max(syy-slope*sxy, 0)
	return slope, math.Sqrt(rss / float64(df) / sxx), df
}
