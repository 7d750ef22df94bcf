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
// samples from it while it is younger than a third of the interval. A
// thousand experiments sampling every 15 s then cost the source a few queries
// per interval instead of three thousand. An answer up to a third of an
// interval old extends each sample's Window by its age, so a window never
// counts load from before it began; a guardrail sees a breach at most that
// much later. A failed shared fetch is not reused: the experiment then queries
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

// Sample answers from the group's last fetch when it is fresh and covers
// t.Pods, queries alone when it is fresh but lacks t's pods, and otherwise
// fetches for the whole group; it falls back to a query of its own when the
// shared fetch fails.
func (s *sharedProvider) Sample(ctx context.Context, t metrics.Target) ([]metrics.Sample, error) {
	if len(t.Pods) == 0 {
		return s.inner.Sample(ctx, t)
	}
	g := s.group
	select {
	case g.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	now := s.now()
	for _, p := range t.Pods {
		g.wanted[p] = now
	}
	fresh := now.Sub(g.at) < s.maxAge
	if fresh && !covers(g.asked, t.Pods) {
		// A new experiment (or a new pod) queries alone this once; the next
		// shared fetch includes it. Refetching for everyone here would make
		// N experiments starting together cost N fetches of up to N pods.
		<-g.sem
		return s.inner.Sample(ctx, t)
	}
	defer func() { <-g.sem }()
	if !fresh {
		if err := s.fetch(ctx, t, now); err != nil {
			return s.inner.Sample(ctx, t)
		}
	}
	age := now.Sub(g.at)
	var out []metrics.Sample
	for _, p := range t.Pods {
		if smp, ok := g.got[p]; ok {
			smp.Window += age
			out = append(out, smp)
		}
	}
	return out, nil
}

// joinNext adds t's pods to the group's next fetch and returns when it is
// due, if the last fetch is fresh and lacks them (Sample would query alone);
// the zero time otherwise. A sample taken then finds the pods in a fetch made
// since, or makes that fetch itself, for the whole group.
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
	if now.Sub(g.at) >= s.maxAge || covers(g.asked, t.Pods) {
		return time.Time{}
	}
	for _, p := range t.Pods {
		g.wanted[p] = now
	}
	return g.at.Add(s.maxAge)
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
