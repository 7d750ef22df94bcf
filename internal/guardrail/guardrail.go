// Package guardrail decides, purely, when an experiment must be aborted because
// its target is in danger: a runaway heap, an OOM kill, restarts, or memory near
// the limit. It reads no clock and makes no calls; its State is JSON that the
// engine keeps in the experiment's status, so an operator restarted at any moment
// takes the same decisions.
//
// Integration:
//   - Record the samples taken before the first toggle (the baseline window):
//     the growth rule learns each pod's heap after GC (its floor) and the band
//     it stays in, and needs about eight GC cycles of it (ten minutes at one GC
//     a minute) to judge a jump of the floor within two or three GC cycles of
//     a leak's onset. Without that history only the slower floor trend acts,
//     after six GC cycles or more. test/bench/guardrail measures both.
//   - Observe every sample from the first toggle on; abort on a non-nil Breach.
//   - Reset when the load rate changes (a new stage starts). The rule judges the
//     floor, so a new allocation rate alone does not trip it, but the pods'
//     history then describes another load; Reset keeps the restart count.
//
// The growth rule is described in growth.go, with the reasons for its parameters.
package guardrail

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
	"perfexp.dev/perf-operator/internal/metrics"
)

// Config is the guardrails' configuration, from spec.guardrails and
// spec.metrics.interval.
type Config struct {
	// MaxGrowthPerMinute is the sustained heap growth, in bytes per minute,
	// beyond which the experiment aborts (spec.guardrails.heap.maxGrowthPerMinute).
	MaxGrowthPerMinute float64
	// MaxUtilization is the fraction of the memory limit the working set may
	// reach (spec.guardrails.heap.maxUtilization), e.g. 0.9. Zero disables it.
	MaxUtilization float64
	// ConsecutiveBreaches is how many evaluations in a row must breach the growth
	// rule (spec.guardrails.heap.consecutiveBreaches).
	ConsecutiveBreaches int
	// MaxRestarts is how many container restarts, summed over the target's pods
	// since the first Observe, are tolerated (spec.guardrails.maxRestarts).
	MaxRestarts int32
	// Interval is the sampling interval (spec.metrics.interval).
	Interval time.Duration
	// NoGrowth turns the growth rule off: in a load-only sweep the heap rises
	// with each stage's load, which is no leak. The memory limit, OOM kills and
	// restarts are still judged.
	NoGrowth bool
}

// ConfigFrom reads the guardrails of a defaulted spec. Unset fields take the
// API's defaults, so a spec that skipped defaulting still works.
func ConfigFrom(spec *perfv1.PerfExperimentSpec) (Config, error) {
	g := spec.Guardrails
	c := Config{MaxRestarts: g.MaxRestarts, ConsecutiveBreaches: int(g.Heap.ConsecutiveBreaches), NoGrowth: !spec.HasToggle()}
	growth := resourceDefault(g.Heap.MaxGrowthPerMinute)
	c.MaxGrowthPerMinute = growth.AsApproximateFloat64()
	if !(c.MaxGrowthPerMinute > 0) {
		return Config{}, fmt.Errorf("spec.guardrails.heap.maxGrowthPerMinute: must be a positive quantity of bytes per minute, such as 100Mi")
	}
	util := g.Heap.MaxUtilization
	if util == "" {
		util = perfv1.DefaultMaxUtilization
	}
	f, err := util.Fraction()
	if err != nil {
		return Config{}, fmt.Errorf("spec.guardrails.heap.maxUtilization: %w", err)
	}
	c.MaxUtilization = f
	if c.ConsecutiveBreaches <= 0 {
		c.ConsecutiveBreaches = int(perfv1.DefaultConsecutive)
	}
	if c.MaxRestarts < 0 {
		return Config{}, fmt.Errorf("spec.guardrails.maxRestarts: must be 0 or more")
	}
	interval := spec.Metrics.Interval
	if interval == "" {
		interval = perfv1.DefaultMetricsInterval
	}
	if c.Interval, err = interval.Parse(); err != nil {
		return Config{}, fmt.Errorf("spec.metrics.interval: %w", err)
	}
	if c.Interval <= 0 {
		return Config{}, fmt.Errorf("spec.metrics.interval: must be positive")
	}
	return c, nil
}

// PodState is what the pod status says about a target pod's container.
type PodState struct {
	// Name is the pod's name.
	Name string
	// Restarts is the container's restart count.
	Restarts int32
	// OOMKilled is true when the container's last termination (or current one)
	// was an OOM kill.
	OOMKilled bool
	// StartedAt is when the running container started; zero when not running.
	StartedAt time.Time
}

// Breach is a guardrail that tripped.
type Breach struct {
	// Reason is one of perfv1.ReasonHeapGrowth, ReasonMemoryLimit,
	// ReasonOOMKilled or ReasonRestarts.
	Reason string
	// Message explains it with numbers.
	Message string
	// At is the time of the sample or observation that tripped it.
	At time.Time
}

// Observe runs every guardrail on one batch of samples (usually one instant's,
// one per pod) and the pods' states, and returns the first breach found, else nil.
// The hard limits come first and trip at once: an OOM kill, restarts beyond
// MaxRestarts, the working set beyond MaxUtilization of limitBytes (0 or NaN: no
// limit known). Then the growth rule, on each new sample, per pod.
//
// Restarts count from the first Observe: a pod seen then keeps its earlier
// restarts and a past OOM kill out of the count; a pod first seen later was
// created during the run (a rollout), so all of its restarts count.
func (s *State) Observe(cfg Config, samples []metrics.Sample, pods []PodState, limitBytes float64, now time.Time) *Breach {
	first := s.Start == 0
	if first {
		s.Start = now.UnixMilli()
	}
	breach := s.observePods(cfg, pods, first, now)
	for _, smp := range sortedSamples(samples) {
		b := s.observeSample(cfg, smp, limitBytes, true)
		if breach == nil {
			breach = b
		}
	}
	s.prune(now.UnixMilli())
	return breach
}

// Record adds samples to the pods' growth histories without evaluating any rule
// or starting the restart count. Use it for the samples taken before the first
// toggle, so the growth rule knows each pod's healthy sawtooth when the toggle
// lands.
func (s *State) Record(cfg Config, samples []metrics.Sample, pods []PodState, now time.Time) {
	for _, p := range pods {
		s.track(p.Name, now.UnixMilli()).setStartedAt(p.StartedAt)
	}
	for _, smp := range sortedSamples(samples) {
		s.observeSample(cfg, smp, 0, false)
	}
	s.prune(now.UnixMilli())
}

// observePods updates restart accounting and checks OOM kills and restarts.
func (s *State) observePods(cfg Config, pods []PodState, first bool, now time.Time) *Breach {
	var breach *Breach
	for _, ps := range sortedPods(pods) {
		p := s.track(ps.Name, now.UnixMilli())
		p.setStartedAt(ps.StartedAt)
		switch {
		case !p.Counted:
			// Seen at the start, or already running before it: its past is not the
			// run's. Otherwise it was created during the run: all its restarts count.
			p.Counted = true
			if first || (p.StartedAt != 0 && p.StartedAt < s.Start) {
				p.BaseRestarts, p.OOMBase = ps.Restarts, ps.OOMKilled
			}
		case ps.Restarts < p.Restarts:
			// The count went back: a new pod with the same name. Keep what the old
			// one counted; all of the new one's restarts count.
			s.GoneRestarts += p.counted()
			p.BaseRestarts, p.OOMBase = 0, false
		}
		p.Restarts = ps.Restarts
		if ps.OOMKilled && !(p.OOMBase && p.Restarts == p.BaseRestarts) && breach == nil {
			breach = &Breach{Reason: perfv1.ReasonOOMKilled, At: now,
				Message: fmt.Sprintf("pod %s: container was OOM-killed (restart count %d)", ps.Name, ps.Restarts)}
		}
	}
	if breach != nil {
		return breach
	}
	return s.restartBreach(cfg, now)
}

// restartBreach checks the restarts counted since the first Observe.
func (s *State) restartBreach(cfg Config, now time.Time) *Breach {
	total := s.GoneRestarts
	var who []string
	for i := range s.Pods {
		if c := s.Pods[i].counted(); c > 0 {
			total += c
			who = append(who, fmt.Sprintf("%s %d", s.Pods[i].Name, c))
		}
	}
	if total <= cfg.MaxRestarts {
		return nil
	}
	if s.GoneRestarts > 0 {
		who = append(who, fmt.Sprintf("pods since replaced %d", s.GoneRestarts))
	}
	times := "times"
	if total == 1 {
		times = "time"
	}
	return &Breach{Reason: perfv1.ReasonRestarts, At: now, Message: fmt.Sprintf(
		"target containers restarted %d %s since the guardrails started (max %d): %s",
		total, times, cfg.MaxRestarts, strings.Join(who, ", "))}
}

// observeSample checks the memory limit and feeds the growth rule; with check
// false it only records.
func (s *State) observeSample(cfg Config, smp metrics.Sample, limitBytes float64, check bool) *Breach {
	smp = metrics.Finite(smp) // NaN, ±Inf or a negative reading is no evidence of anything
	p := s.track(smp.Pod, smp.Time.UnixMilli())
	var breach *Breach
	if check && cfg.MaxUtilization > 0 && limitBytes > 0 && smp.WorkingSetBytes/limitBytes > cfg.MaxUtilization {
		breach = &Breach{Reason: perfv1.ReasonMemoryLimit, At: smp.Time, Message: fmt.Sprintf(
			"pod %s: working set %s is %s of the %s memory limit (max %s)", smp.Pod,
			formatBytes(smp.WorkingSetBytes), formatPercent(smp.WorkingSetBytes/limitBytes),
			formatBytes(limitBytes), formatPercent(cfg.MaxUtilization))}
	}
	series, v, ok := p.value(smp.HeapBytes, smp.WorkingSetBytes, smp.Time)
	if !ok || !p.add(smp.Time, series, v, cfg.Interval) || cfg.NoGrowth {
		return breach
	}
	w := workspaces.Get().(*workspace)
	w.t, w.y = p.points(w.t, w.y)
	w.prior = p.priorDrop()
	theta := cfg.MaxGrowthPerMinute / 60
	var verdict verdict
	if check {
		verdict = w.assess(w.t, w.y, theta)
	} else {
		// Only recording, but the drops it sees are remembered: a strobe's
		// last wrap may have left the history when the checks begin.
		w.prepare(w.t, w.y)
	}
	p.rememberDrop(w.remember(theta))
	workspaces.Put(w)
	if !check {
		return breach
	}
	if !verdict.breach {
		p.Breaches = 0
		return breach
	}
	p.Breaches++
	if p.Breaches < cfg.ConsecutiveBreaches || breach != nil {
		return breach
	}
	current := smp.WorkingSetBytes
	if math.IsNaN(current) {
		current = v
	}
	return &Breach{Reason: perfv1.ReasonHeapGrowth, At: smp.Time,
		Message: growthMessage(smp.Pod, series, verdict, cfg, current, limitBytes)}
}

// workspaces recycles evaluation buffers: the engine decodes a fresh State from
// status for every sample, so buffers kept in the State would be reallocated
// every time.
var workspaces = sync.Pool{New: func() any { return newWorkspace() }}

func newWorkspace() *workspace {
	w := &workspace{}
	for _, b := range []*[]float64{&w.t, &w.y, &w.ct, &w.cy, &w.ft, &w.fy, &w.b, &w.c, &w.d} {
		*b = make([]float64, 0, maxPoints)
	}
	w.a = make([]float64, 0, maxPoints*(maxPoints-1)/2) // every pair of points
	w.block, w.chunk = make([]int32, 0, maxPoints), make([]int32, 0, maxPoints)
	w.th = make([]tooth, 0, maxPoints)
	return w
}

// sortedSamples orders samples by time, then pod, so the outcome does not depend
// on the order the metrics source listed them in.
func sortedSamples(samples []metrics.Sample) []metrics.Sample {
	if slices.IsSortedFunc(samples, compareSamples) {
		return samples
	}
	return slices.SortedFunc(slices.Values(samples), compareSamples)
}

func compareSamples(a, b metrics.Sample) int {
	if c := a.Time.Compare(b.Time); c != 0 {
		return c
	}
	return strings.Compare(a.Pod, b.Pod)
}

func sortedPods(pods []PodState) []PodState {
	cmp := func(a, b PodState) int { return strings.Compare(a.Name, b.Name) }
	if slices.IsSortedFunc(pods, cmp) {
		return pods
	}
	return slices.SortedFunc(slices.Values(pods), cmp)
}
