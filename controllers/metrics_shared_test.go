package controllers

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
	"perfexp.dev/perf-operator/internal/metrics"
)

// countingProvider answers for every pod asked and records each call's pods.
type countingProvider struct {
	calls [][]string
	fail  func(pods []string) bool
}

func (c *countingProvider) Name() string { return metrics.PrometheusName }

func (c *countingProvider) Sample(_ context.Context, t metrics.Target) ([]metrics.Sample, error) {
	c.calls = append(c.calls, slices.Clone(t.Pods))
	if c.fail != nil && c.fail(t.Pods) {
		return nil, errors.New("bad series")
	}
	var out []metrics.Sample
	for _, p := range t.Pods {
		out = append(out, metrics.Sample{Pod: p, Window: time.Minute, CPUCores: 1})
	}
	return out, nil
}

func TestSharedMetricsOneFetchServesANamespace(t *testing.T) {
	exp := func(name, ns string) *perfv1.PerfExperiment {
		return &perfv1.PerfExperiment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: perfv1.PerfExperimentSpec{Metrics: perfv1.MetricsSpec{Interval: "15s", Prometheus: &perfv1.PrometheusSpec{URL: "http://prom"}}}}
	}
	now := time.Unix(1000, 0)
	clock := func() time.Time { return now }
	inner := &countingProvider{}
	var m sharedMetrics
	a := m.wrap(inner, exp("a", "shop"), "app", clock)
	b := m.wrap(inner, exp("b", "shop"), "app", clock)
	other := m.wrap(inner, exp("c", "other"), "app", clock)
	ctx := context.Background()
	sample := func(p metrics.Provider, pods ...string) []metrics.Sample {
		t.Helper()
		got, err := p.Sample(ctx, metrics.Target{Namespace: "shop", Pods: pods, Container: "app"})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}

	sample(a, "a-1")
	sample(b, "b-1") // fresh but not covered: b queries alone once
	if want := [][]string{{"a-1"}, {"b-1"}}; !slices.EqualFunc(inner.calls, want, slices.Equal) {
		t.Fatalf("fetches %v, want %v", inner.calls, want)
	}
	now = now.Add(5 * time.Second)
	sample(a, "a-1") // stale: one fetch for both
	if last := inner.calls[len(inner.calls)-1]; len(inner.calls) != 3 || !slices.Equal(last, []string{"a-1", "b-1"}) {
		t.Fatalf("fetches %v, want a third for both pods", inner.calls)
	}
	inner.calls = inner.calls[1:]
	now = now.Add(2 * time.Second)
	got := sample(a, "a-1") // fresh and covered: no query
	if len(inner.calls) != 2 || len(got) != 1 || got[0].Window != time.Minute+2*time.Second {
		t.Fatalf("after 2s: %d fetches, samples %+v; want 2 fetches and the window stretched by the answer's age", len(inner.calls), got)
	}
	now = now.Add(4 * time.Second) // older than interval/3
	sample(b, "b-1")
	if len(inner.calls) != 3 || !slices.Equal(inner.calls[2], []string{"a-1", "b-1"}) {
		t.Fatalf("stale answer: fetches %v", inner.calls)
	}
	// b samples late (a busy operator): a's pod is still in the shared query.
	now = now.Add(40 * time.Second)
	sample(a, "a-1")
	if last := inner.calls[len(inner.calls)-1]; !slices.Equal(last, []string{"a-1", "b-1"}) {
		t.Fatalf("b's pod left the shared query after 40s: %v", last)
	}
	sample(b, "b-1")
	if len(inner.calls) != 4 {
		t.Fatalf("b's late sample fetched again: %v", inner.calls)
	}
	inner.calls = inner.calls[:3]
	sample(other, "c-1")
	if len(inner.calls) != 4 || !slices.Equal(inner.calls[3], []string{"c-1"}) {
		t.Fatalf("another namespace shares nothing: fetches %v", inner.calls)
	}

	// A shared fetch that fails is not reused: each experiment queries alone.
	inner.fail = func(pods []string) bool { return slices.Contains(pods, "b-1") }
	now = now.Add(time.Minute)
	if got := sample(a, "a-1"); len(got) != 1 || got[0].Pod != "a-1" {
		t.Fatalf("a's own query after the shared one failed: %+v", got)
	}
	if last := inner.calls[len(inner.calls)-1]; !slices.Equal(last, []string{"a-1"}) {
		t.Fatalf("fallback asked for %v, want only a's pod", last)
	}
}

// Experiments with the same spec.metrics share the choice of source (source
// auto checks that Prometheus answers) while it is recent; another spec, or
// the same spec keepFor intervals later, chooses again.
func TestSharedMetricsReuseTheChoiceOfSource(t *testing.T) {
	spec := perfv1.MetricsSpec{Interval: "15s", Prometheus: &perfv1.PrometheusSpec{URL: "http://prom"}}
	other := perfv1.MetricsSpec{Interval: "15s", Prometheus: &perfv1.PrometheusSpec{URL: "http://other"}}
	chosen := 0
	choose := func() (metrics.Provider, error) { chosen++; return &countingProvider{}, nil }
	var m sharedMetrics
	start := time.Unix(1000, 0)
	first, err := m.provider(spec, start, choose)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := m.provider(spec, start.Add(time.Minute), choose)
	if chosen != 1 || again != first {
		t.Errorf("the same spec a minute later chose %d times (same provider: %v), want once", chosen, again == first)
	}
	if _, _ = m.provider(other, start, choose); chosen != 2 {
		t.Errorf("another spec chose %d times in all, want 2", chosen)
	}
	if later, _ := m.provider(spec, start.Add(keepFor*15*time.Second), choose); chosen != 3 || later == first {
		t.Errorf("after keepFor intervals the choice was reused (chosen %d times)", chosen)
	}
	failing := func() (metrics.Provider, error) { return nil, errors.New("unreachable") }
	if _, err := m.provider(perfv1.MetricsSpec{Interval: "15s"}, start, failing); err == nil {
		t.Error("a failed choice was not returned")
	}
	if _, err := m.provider(perfv1.MetricsSpec{Interval: "15s"}, start, choose); err != nil || chosen != 4 {
		t.Errorf("a failed choice was remembered (chosen %d times, err %v)", chosen, err)
	}
}

// A newcomer whose pods the fresh shared answer lacks joins the next shared
// fetch instead of querying alone: joinNext names when that fetch is due, and
// a sample then fetches once for the whole group, the newcomer's pods
// included. With a stale answer, or pods already covered, nothing waits.
func TestSharedMetricsANewcomerJoinsTheNextFetch(t *testing.T) {
	now := time.Unix(1000, 0)
	inner, a, b := twoSharing(func() time.Time { return now })
	ctx := context.Background()
	if due := a.joinNext(ctx, sharedTarget("a-1")); !due.IsZero() {
		t.Fatalf("no fetch yet: the first experiment waits until %v", due)
	}
	if _, err := a.Sample(ctx, sharedTarget("a-1")); err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Second)
	due := b.joinNext(ctx, sharedTarget("b-1"))
	if want := time.Unix(1015, 0); !due.Equal(want) {
		t.Fatalf("b waits until %v, want %v (the group's next fetch, an interval after its last)", due, want)
	}
	if len(inner.calls) != 1 {
		t.Fatalf("joining queried: %v", inner.calls)
	}
	now = due
	got, err := b.Sample(ctx, sharedTarget("b-1"))
	if err != nil || len(got) != 1 || got[0].Pod != "b-1" {
		t.Fatalf("b's sample after the wait: %+v, %v", got, err)
	}
	if want := [][]string{{"a-1"}, {"a-1", "b-1"}}; !slices.EqualFunc(inner.calls, want, slices.Equal) {
		t.Fatalf("fetches %v, want %v: one shared fetch with b's pod, no query of b's alone", inner.calls, want)
	}
	now = now.Add(time.Second)
	if due := b.joinNext(ctx, sharedTarget("b-1")); !due.IsZero() {
		t.Errorf("covered pods wait until %v", due)
	}
}

// A sample taken late, behind a busy queue, is answered by the fetch its group
// made after it fell due, stamped with that fetch's time, instead of fetching
// again: the group keeps one fetch per interval.
func TestSharedMetricsALateSampleKeepsTheGroupsCadence(t *testing.T) {
	now := time.Unix(1000, 0)
	inner, a, b := twoSharing(func() time.Time { return now })
	ctx := context.Background()
	if _, at, err := a.sampleAt(ctx, sharedTarget("a-1"), time.Time{}); err != nil || !at.Equal(now) {
		t.Fatalf("first fetch at %v, %v", at, err)
	}
	now = time.Unix(1002, 0)
	due := b.joinNext(ctx, sharedTarget("b-1")) // b's first sample waits for the group's next fetch
	if !due.Equal(time.Unix(1015, 0)) {
		t.Fatalf("b joins at %v", due)
	}
	now = time.Unix(1016, 0) // a is on time
	if _, at, err := a.sampleAt(ctx, sharedTarget("a-1"), due); err != nil || !at.Equal(now) {
		t.Fatalf("a's second sample at %v, %v: want a fetch now", at, err)
	}
	now = time.Unix(1023, 0) // b comes 8 s late: the answer is 7 s old, past maxAge
	got, at, err := b.sampleAt(ctx, sharedTarget("b-1"), due)
	if err != nil || len(got) != 1 || got[0].Window != time.Minute {
		t.Fatalf("b's late sample: %+v, %v", got, err)
	}
	if want := time.Unix(1016, 0); !at.Equal(want) {
		t.Errorf("b's late sample is stamped %v, want the fetch's %v", at, want)
	}
	if want := [][]string{{"a-1"}, {"a-1", "b-1"}}; !slices.EqualFunc(inner.calls, want, slices.Equal) {
		t.Errorf("fetches %v, want %v: two intervals, two fetches", inner.calls, want)
	}
	// Due after the last fetch, which is stale: fetched again.
	now = time.Unix(1032, 0)
	if _, at, err := b.sampleAt(ctx, sharedTarget("b-1"), time.Unix(1031, 0)); err != nil || !at.Equal(now) {
		t.Errorf("a sample due after the last fetch, stale: stamped %v, %v; want a fetch now", at, err)
	}
	if len(inner.calls) != 3 {
		t.Errorf("fetches %v: want a third", inner.calls)
	}
}

// twoSharing returns experiments a and b of one namespace sharing a 15 s
// Prometheus group over inner, read at clock.
func twoSharing(clock func() time.Time) (inner *countingProvider, a, b *sharedProvider) {
	exp := func(name string) *perfv1.PerfExperiment {
		return &perfv1.PerfExperiment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop"},
			Spec: perfv1.PerfExperimentSpec{Metrics: perfv1.MetricsSpec{Interval: "15s", Prometheus: &perfv1.PrometheusSpec{URL: "http://prom"}}}}
	}
	inner = &countingProvider{}
	m := &sharedMetrics{}
	a = m.wrap(inner, exp("a"), "app", clock).(*sharedProvider)
	b = m.wrap(inner, exp("b"), "app", clock).(*sharedProvider)
	return inner, a, b
}

// sharedTarget is a Target of the given pods in twoSharing's namespace.
func sharedTarget(pods ...string) metrics.Target {
	return metrics.Target{Namespace: "shop", Pods: pods, Container: "app"}
}
