package controllers_test

import (
	"context"
	"math"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
	"perfexp.dev/perf-operator/internal/metrics"
)

// fakeMetrics is the metrics source of the envtest suite: two pods whose CPU is
// 0.40 cores each (0.42 with the toggle on) and, when leak is set, whose heap
// grows 700 MB a minute of fake time from the moment the toggle is on — the
// seed's death spiral.
type fakeMetrics struct {
	clock *clocktesting.FakeClock
	mu    sync.Mutex
	leak  bool
	onAt  time.Time
}

func (f *fakeMetrics) setLeak(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.leak = on
}

func (f *fakeMetrics) Provider(context.Context, perfv1.MetricsSpec) (metrics.Provider, string, error) {
	return f, "test", nil
}

func (f *fakeMetrics) Name() string { return metrics.MetricsServerName }

func (f *fakeMetrics) Sample(ctx context.Context, t metrics.Target) ([]metrics.Sample, error) {
	dep := &appsv1.Deployment{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: depName(t.PodSelector)}, dep); err != nil {
		return nil, err
	}
	on := false
	for _, e := range dep.Spec.Template.Spec.Containers[0].Env {
		on = on || e.Name == "PROFILING"
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.clock.Now()
	switch {
	case on && f.onAt.IsZero():
		f.onAt = now
	case !on:
		f.onAt = time.Time{}
	}
	// A healthy JVM's sawtooth: 0.6 GB after GC, climbing to 1.6 GB, one GC a
	// minute; the working set follows the committed heap, well inside the test
	// target's 4 Gi limit.
	phase := float64(now.Unix()%60) / 60
	heap := 0.6e9 + phase*1.0e9
	ws := 2.2e9
	cpu := 0.40
	if on {
		cpu = 0.42
		if f.leak {
			leaked := now.Sub(f.onAt).Minutes() * 700e6
			heap += leaked
			ws += leaked
		}
	}
	var out []metrics.Sample
	for _, pod := range []string{"app-1", "app-2"} {
		out = append(out, metrics.Sample{Time: now, Pod: pod, CPUCores: cpu, WorkingSetBytes: ws, HeapBytes: heap, GCSecondsPerSecond: math.NaN()})
	}
	return out, nil
}

// depName recovers the target's name from its selector "app=<name>" (the
// cluster helper's convention).
func depName(selector string) string {
	const prefix = "app="
	if len(selector) > len(prefix) && selector[:len(prefix)] == prefix {
		return selector[len(prefix):]
	}
	return selector
}
