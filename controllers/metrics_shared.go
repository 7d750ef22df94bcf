package controllers

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"time"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
	"perfexp.dev/perf-operator/internal/metrics"
)

// sharedMetrics lets the experiments of one namespace that read the same
// source the same way (spec.metrics and the container name equal) share their
// metrics queries: one fetch asks for every pod these experiments sampled
// lately, and an experiment whose pods the last fetch covered takes its
// samples from it while it is younger than a third of the interval, or
// when it was fetched after their sample fell due. Each sample is stamped with
// its fetch's time, and the next falls due an interval after it, so the
// experiments of a group keep one cadence: a thousand experiments sampling
// every 15 s cost the source one query of each kind per interval instead of
// three thousand. A guardrail sees a breach at most a third of an interval
// later than at its own query. A failed shared fetch is not reused: the experiment then queries
// alone, so one target's bad series cannot fail its neighbours' samples.
type sharedMetrics struct {
	mu     sync.Mutex
	groups map[string]*metricsGroup
	// chosen is the provider chosen last for each spec.metrics, and when.
	chosen map[string]chosenProvider
}

type chosenProvider struct {
	prov metrics.Provider
	at   time.Time
}

// provider returns the provider chosen for the same spec.metrics within the
// last keepFor intervals, or calls choose. Choosing checks the source (source
// auto asks Prometheus whether it answers): a thousand experiments starting
// together made as many checks of one server. A choice is reused for a
// while only: an experiment starting later sees the source as it is then.
// Each experiment keeps the provider it started with for its whole run.
func (m *sharedMetrics) provider(spec perfv1.MetricsSpec, now time.Time, choose func() (metrics.Provider, error)) (metrics.Provider, error) {
	interval, err := spec.Interval.Parse()
	if err != nil || interval <= 0 {
		return choose()
	}
	b, err := json.Marshal(spec)
	if err != nil {
		return choose()
	}
	key := string(b)
	m.mu.Lock()
	c, ok := m.chosen[key]
	m.mu.Unlock()
	if ok && now.Sub(c.at) < keepFor*interval {
		return c.prov, nil
	}
	prov, err := choose()
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.chosen == nil {
		m.chosen = map[string]chosenProvider{}
	}
	for k, c := range m.chosen { // forget the choices of specs no longer started
		if now.Sub(c.at) >= keepFor*interval {
			delete(m.chosen, k)
		}
	}
	m.chosen[key] = chosenProvider{prov: prov, at: now}
	return prov, nil
}

// metricsGroup is one shared query's state. sem holds one fetch at a time;
// waiters give up with their own context.
type metricsGroup struct {
	sem chan struct{}
	// wanted are the pods asked for, with when; fetches ask for those asked
	// within the last keepFor intervals, so an experiment whose sample comes
	// late (a busy operator) still finds its pods in the shared answer
	// instead of making a fetch of its own.
	wanted map[string]time.Time
	at     time.Time
	got    map[string]metrics.Sample
	asked  map[string]bool
}

// sharedProvider is one experiment's view of a group.
type sharedProvider struct {
	inner    metrics.Provider
	group    *metricsGroup
	interval time.Duration
	maxAge   time.Duration
	keep     time.Duration
	now      func() time.Time
}

// keepFor is how many intervals a pod stays in the shared query after its
// experiment last asked for it: pods of ended experiments leave the query
// after it, and return no series in the meantime.
const keepFor = 10

// wrap returns prov sharing its queries with every experiment of the same
// namespace, spec.metrics and container; prov itself when spec.metrics has no
// usable interval.
func (m *sharedMetrics) wrap(prov metrics.Provider, exp *perfv1.PerfExperiment, container string, now func() time.Time) metrics.Provider {
	interval, err := exp.Spec.Metrics.Interval.Parse()
	if err != nil || interval <= 0 {
		return prov
	}
	spec, err := json.Marshal(exp.Spec.Metrics)
	if err != nil {
		return prov
	}
	key := prov.Name() + "\x00" + exp.Namespace + "\x00" + container + "\x00" + string(spec)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.groups == nil {
		m.groups = map[string]*metricsGroup{}
	}
	g := m.groups[key]
	if g == nil {
		g = &metricsGroup{sem: make(chan struct{}, 1), wanted: map[string]time.Time{}}
		m.groups[key] = g
	}
	return &sharedProvider{inner: prov, group: g, interval: interval, maxAge: interval / 3, keep: keepFor * interval, now: now}
}

func (s *sharedProvider) Name() string { return s.inner.Name() }

// Sample answers as sampleAt does, for a sample due now: the values are
// stamped by the caller, so an answer's age extends each sample's Window.
func (s *sharedProvider) Sample(ctx context.Context, t metrics.Target) ([]metrics.Sample, error) {
	got, at, err := s.sampleAt(ctx, t, time.Time{})
	if err != nil || at.IsZero() {
		return got, err
	}
	age := s.now().Sub(at)
	for i := range got {
		got[i].Window += age
	}
	return got, nil
}

// sampleAt answers from the group's last fetch when it serves a sample due at
// due and covers t.Pods, queries alone when it would serve but lacks t's
// pods, and otherwise fetches for the whole group; it falls back to a query of
// its own when the shared fetch fails. at is when a shared answer was fetched
// (the instant its values describe); the zero time for a query of its own.
//
// An answer serves a sample while it is younger than maxAge, or when it was
// fetched after the sample fell due: a sample taken late (behind a busy
// queue) is on time with the fetch its group made when it was due, and, stamped
// with that fetch's time, stays on the group's cadence instead of starting a
// second fetch per interval (docs/scale.md).
func (s *sharedProvider) sampleAt(ctx context.Context, t metrics.Target, due time.Time) ([]metrics.Sample, time.Time, error) {
	if len(t.Pods) == 0 {
		return s.alone(ctx, t)
	}
	g := s.group
	select {
	case g.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, time.Time{}, ctx.Err()
	}
	now := s.now()
	for _, p := range t.Pods {
		g.wanted[p] = now
	}
	fresh := !g.at.IsZero() && (now.Sub(g.at) < s.maxAge || (!due.IsZero() && !g.at.Before(due)))
	if fresh && !covers(g.asked, t.Pods) {
		// A new experiment (or a new pod) queries alone this once; the next
		// shared fetch includes it. Refetching for everyone here would make
		// N experiments starting together cost N fetches of up to N pods.
		<-g.sem
		return s.alone(ctx, t)
	}
	defer func() { <-g.sem }()
	if !fresh {
		if err := s.fetch(ctx, t, now); err != nil {
			return s.alone(ctx, t)
		}
	}
	var out []metrics.Sample
	for _, p := range t.Pods {
		if smp, ok := g.got[p]; ok {
			out = append(out, smp)
		}
	}
	return out, g.at, nil
}

// alone queries t by itself, outside the group's fetch; its samples carry
// their own time (the zero fetch time).
func (s *sharedProvider) alone(ctx context.Context, t metrics.Target) ([]metrics.Sample, time.Time, error) {
	got, err := s.inner.Sample(ctx, t)
	return got, time.Time{}, err
}

// joinNext adds t's pods to the group's next fetch and returns when it is
// due, when the group fetches on a cadence that the sample would otherwise
// leave: the last answer is less than an interval old and does not serve t
// (too old, or lacking its pods). A sample taken then finds the pods in the
// fetch the group's next due sample makes, or makes that fetch itself. The
// zero time when the sample can be taken now: no fetch yet, the next one due,
// or the last answer serves it.
func (s *sharedProvider) joinNext(ctx context.Context, t metrics.Target) time.Time {
	if len(t.Pods) == 0 {
		return time.Time{}
	}
	g := s.group
	select {
	case g.sem <- struct{}{}:
	case <-ctx.Done():
		return time.Time{}
	}
	defer func() { <-g.sem }()
	now := s.now()
	next := g.at.Add(s.interval)
	if g.at.IsZero() || !now.Before(next) || (now.Sub(g.at) < s.maxAge && covers(g.asked, t.Pods)) {
		return time.Time{}
	}
	for _, p := range t.Pods {
		g.wanted[p] = now
	}
	return next
}

// fetch queries every pod asked for lately, t's included.
func (s *sharedProvider) fetch(ctx context.Context, t metrics.Target, now time.Time) error {
	g := s.group
	var pods []string
	for p, at := range g.wanted {
		if now.Sub(at) > s.keep {
			delete(g.wanted, p)
			continue
		}
		pods = append(pods, p)
	}
	slices.Sort(pods)
	got, err := s.inner.Sample(ctx, metrics.Target{Namespace: t.Namespace, Pods: pods, Container: t.Container})
	if err != nil {
		g.at, g.got, g.asked = time.Time{}, nil, nil
		return err
	}
	g.at, g.got, g.asked = now, make(map[string]metrics.Sample, len(got)), make(map[string]bool, len(pods))
	for _, p := range pods {
		g.asked[p] = true
	}
	for _, smp := range got {
		g.got[smp.Pod] = smp
	}
	return nil
}

func covers(asked map[string]bool, pods []string) bool {
	for _, p := range pods {
		if !asked[p] {
			return false
		}
	}
	return true
}
