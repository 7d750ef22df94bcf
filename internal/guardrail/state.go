package guardrail

import (
	"math"
	"slices"
	"strings"
	"time"
)

// Bounds of the persisted state. The engine stores the State, as JSON, in the
// experiment's status on every status write, so it must stay small whatever runs:
// a pod's history holds 16 minutes of points (eight or more GC cycles of
// reference plus the window under test) — 64 at the default 15 s interval, 96
// at 10 s, never fewer than 64 or more than 96 — and 20 pods cover a rollout of
// a ten-replica Deployment with maxSurge 100 %.
const (
	minPoints   = 64
	maxPoints   = 96
	historySpan = 16 * time.Minute
	maxPods     = 20
	// minSpacing is the finest resolution kept: with a shorter interval every
	// sample is still checked against the hard limits, but only one point per
	// 10 s enters the history.
	minSpacing = 10 * time.Second
	// staleAfter: a pod absent from samples and pod states this long is gone
	// (replaced by a rollout); its history is dropped, its restarts are kept.
	staleAfter = 10 * time.Minute
	// warmUp is how long after its container started a pod's samples are ignored
	// by the growth rule: a fresh JVM fills its heap, caches and JIT for minutes,
	// which is growth, but not the toggle's.
	warmUp = 5 * time.Minute
)

// The series a pod's history holds.
const (
	seriesHeap       = "heap"
	seriesWorkingSet = "workingSet"
)

// State is what the guardrails remember between samples. It is JSON-serialisable
// so the engine can keep it in the experiment's status: an operator restarted at
// any moment carries on from it and takes the same decisions. It is bounded:
// at most 20 pods of at most 96 points each (64 at the default 15 s
// interval), about 1–1.5 KiB per pod.
// The zero State is ready to use.
type State struct {
	// Start is when Observe was first called (Unix milliseconds): restarts and
	// OOM kills count from then.
	Start int64 `json:"start,omitempty"`
	// GoneRestarts are the restarts counted on pods no longer tracked.
	GoneRestarts int32 `json:"goneRestarts,omitempty"`
	// Pods are the tracked pods, sorted by name.
	Pods []PodTrack `json:"pods,omitempty"`
}

// PodTrack is one pod's restart accounting and growth history.
type PodTrack struct {
	// Name is the pod's name.
	Name string `json:"name"`
	// Seen is when the pod was last seen in samples or pod states (Unix ms).
	Seen int64 `json:"seen"`
	// StartedAt is the container's start (Unix ms), 0 when unknown.
	StartedAt int64 `json:"startedAt,omitempty"`
	// Counted is true once the pod's restart baseline is recorded.
	Counted bool `json:"counted,omitempty"`
	// BaseRestarts is the restart count that does not count against the run.
	BaseRestarts int32 `json:"baseRestarts,omitempty"`
	// Restarts is the last restart count seen.
	Restarts int32 `json:"restarts,omitempty"`
	// OOMBase is true when the pod's last termination was already an OOM kill at
	// the baseline: it is not counted again until the pod restarts.
	OOMBase bool `json:"oomBase,omitempty"`
	// Series is what the history holds: heap or workingSet.
	Series string `json:"series,omitempty"`
	// Breaches is the number of consecutive evaluations that breached the growth
	// rule.
	Breaches int `json:"breaches,omitempty"`
	// T0 is the time of the first point (Unix ms); DT are the milliseconds from
	// each point to the next; V are the values in KiB. Integers keep the JSON
	// short and make a round trip exact, so decisions after a restart are the
	// same as without one.
	T0 int64   `json:"t0,omitempty"`
	DT []int64 `json:"dt,omitempty"`
	V  []int64 `json:"v,omitempty"`
	// Drop is the last drop the growth rule saw in the history, kept after its
	// points have left it (beenHere, sustain.go): a stroboscopic climb can
	// last longer than the history holds.
	Drop *Drop `json:"drop,omitempty"`
}

// Drop is a fall of the series: the highest point before it and the point
// after it (KiB), and that point's time (Unix ms).
type Drop struct {
	Top    int64 `json:"top"`
	Bottom int64 `json:"bottom"`
	At     int64 `json:"at"`
}

// Reset forgets every pod's growth history, as if the pods had just been seen.
// Call it when the load on the target changes (a new stage starts): the growth
// rule compares the GC cycles it sees with the pod's own recent cycles, and a new
// request rate changes the allocation rate, which for one GC cycle looks like
// growth. Restart and OOM accounting are kept: they count over the whole run.
func (s *State) Reset() {
	for i := range s.Pods {
		s.Pods[i].clearHistory()
	}
}

func (p *PodTrack) clearHistory() {
	p.Series, p.Breaches, p.T0, p.DT, p.V, p.Drop = "", 0, 0, nil, nil, nil
}

// track returns the pod's track, creating it when new; pods stay sorted by name.
func (s *State) track(name string, now int64) *PodTrack {
	i, found := slices.BinarySearchFunc(s.Pods, name, func(p PodTrack, n string) int {
		return strings.Compare(p.Name, n)
	})
	if !found {
		s.Pods = slices.Insert(s.Pods, i, PodTrack{Name: name, Seen: now})
	}
	p := &s.Pods[i]
	p.Seen = max(p.Seen, now)
	return p
}

// counted is the number of restarts of this pod that count against the run.
func (p *PodTrack) counted() int32 {
	if !p.Counted {
		return 0
	}
	return max(0, p.Restarts-p.BaseRestarts)
}

// prune drops pods gone for staleAfter and, beyond maxPods, the least recently
// seen; their counted restarts move to GoneRestarts.
func (s *State) prune(now int64) {
	keep := s.Pods[:0]
	for _, p := range s.Pods {
		if now-p.Seen > staleAfter.Milliseconds() {
			s.GoneRestarts += p.counted()
			continue
		}
		keep = append(keep, p)
	}
	s.Pods = keep
	for len(s.Pods) > maxPods {
		old := 0
		for i, p := range s.Pods {
			if p.Seen < s.Pods[old].Seen {
				old = i
			}
		}
		s.GoneRestarts += s.Pods[old].counted()
		s.Pods = slices.Delete(s.Pods, old, old+1)
	}
}

// setStartedAt records the container's start; a new start (a restart, or a
// new incarnation) begins a new growth history.
func (p *PodTrack) setStartedAt(t time.Time) {
	if t.IsZero() {
		return
	}
	ms := t.UnixMilli()
	if p.StartedAt != 0 && p.StartedAt != ms {
		p.clearHistory()
	}
	p.StartedAt = ms
}

// value picks what the pod's history follows: the heap when the sample has it,
// else the working set. A history of heap points skips a sample that lacks the
// heap (a missed scrape) instead of switching series, unless the heap has been
// missing for staleAfter; switching series starts a new history.
func (p *PodTrack) value(heap, workingSet float64, t time.Time) (string, float64, bool) {
	switch {
	case !math.IsNaN(heap) && !math.IsInf(heap, 0):
		return seriesHeap, heap, true
	case p.Series == seriesHeap && len(p.V) > 0 && t.UnixMilli()-p.lastTime() < staleAfter.Milliseconds():
		return "", 0, false
	case !math.IsNaN(workingSet) && !math.IsInf(workingSet, 0):
		return seriesWorkingSet, workingSet, true
	}
	return "", 0, false
}

// add appends one sample's value to the history. It reports whether a point was
// added: not in the warm-up, not older than the last point, not closer to it than
// the history's resolution.
func (p *PodTrack) add(t time.Time, series string, bytes float64, interval time.Duration) bool {
	spacing, capacity := historySpacing(interval)
	ms := t.UnixMilli()
	if p.StartedAt != 0 && ms < p.StartedAt+warmUp.Milliseconds() {
		return false
	}
	if p.Series != series {
		p.clearHistory()
		p.Series = series
	}
	if n := len(p.V); n > 0 {
		last := p.lastTime()
		// Half an interval of slack lets a sample that comes a little early
		// (scrape jitter) in, and still keeps one point per spacing when the
		// interval is shorter.
		if ms-last < (spacing - interval/2).Milliseconds() {
			return false
		}
		p.DT = append(p.DT, ms-last)
	} else {
		p.T0 = ms
	}
	p.V = append(p.V, int64(math.Round(bytes/1024)))
	if over := len(p.V) - capacity; over > 0 {
		for _, d := range p.DT[:over] {
			p.T0 += d
		}
		p.DT = slices.Delete(p.DT, 0, over)
		p.V = slices.Delete(p.V, 0, over)
	}
	return true
}

// priorDrop is the remembered drop on the clock of the history's points.
func (p *PodTrack) priorDrop() drop {
	if p.Drop == nil {
		return drop{}
	}
	return drop{top: float64(p.Drop.Top) * 1024, bottom: float64(p.Drop.Bottom) * 1024,
		at: float64(p.Drop.At-p.T0) / 1000, ok: true}
}

// rememberDrop keeps d, the drop that still counts or else the history's last
// (workspace.remember), for histories it has left.
func (p *PodTrack) rememberDrop(d drop) {
	if !d.ok {
		return
	}
	if p.Drop == nil {
		p.Drop = &Drop{}
	}
	*p.Drop = Drop{Top: int64(math.Round(d.top / 1024)), Bottom: int64(math.Round(d.bottom / 1024)),
		At: p.T0 + int64(math.Round(d.at*1000))}
}

// historySpacing is the history's resolution at a sampling interval — the
// interval, or minSpacing when it is shorter — and how many points it keeps:
// historySpan at that resolution, within [minPoints, maxPoints].
func historySpacing(interval time.Duration) (time.Duration, int) {
	spacing := max(interval, minSpacing)
	return spacing, min(max(int(historySpan/spacing), minPoints), maxPoints)
}

func (p *PodTrack) lastTime() int64 {
	t := p.T0
	for _, d := range p.DT {
		t += d
	}
	return t
}

// points writes the history as seconds since its first point and bytes.
func (p *PodTrack) points(t, y []float64) ([]float64, []float64) {
	t, y = t[:0], y[:0]
	ms := int64(0)
	for i, v := range p.V {
		if i > 0 {
			ms += p.DT[i-1]
		}
		t = append(t, float64(ms)/1000)
		y = append(y, float64(v)*1024)
	}
	return t, y
}
