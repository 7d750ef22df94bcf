package controllers

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
	"perfexp.dev/perf-operator/internal/engine"
	"perfexp.dev/perf-operator/internal/guardrail"
	"perfexp.dev/perf-operator/internal/metrics"
)

// FlushEvery is how many samples may wait in memory before the status is
// written. Every status write costs a PATCH and, in the operator, encoding,
// sending and decoding the whole experiment twice (the answer and the watch
// event): at N=1000 the largest share of its CPU (test/bench/scale). Sampling
// every 15 s, the status is written every two minutes, and whenever anything
// but samples changes (a window, the toggle, a guardrail breach: at once). A
// restart loses at most the unwritten samples.
const FlushEvery = 8

// RefreshPodsEvery is how many samples reuse the target's pod list: sampling
// every 15 s, restarts and OOM kills are seen within a minute, and a sample
// that misses a pod lists them again at once.
const RefreshPodsEvery = 4

// SampleTimeout bounds one metrics query, so a hanging metrics API holds a
// worker for at most this long; the failure marks the sample missing.
const SampleTimeout = 10 * time.Second

// MetricsSource resolves an experiment's metrics provider.
type MetricsSource interface {
	// Provider returns the provider for the spec and why it was chosen.
	Provider(ctx context.Context, spec perfv1.MetricsSpec) (metrics.Provider, string, error)
}

// pending are one experiment's samples not yet in its persisted status.
type pending struct {
	samples  []metrics.Sample
	failures []engine.SampleFailure
	last     time.Time
	taken    int
	pods     []guardrail.PodState
	podNames []string
	// ready are the live pods that are ready: a sample must have a usable
	// value for each of them, or its instant is missing (metrics.Expect).
	ready    []string
	provider metrics.Provider
	// toggleError is a refused toggle the engine has not yet aborted on.
	toggleError string
	// failedTries counts reconciles in a row whose actions failed, for the
	// retry's backoff.
	failedTries uint
	// live are the k6 pods' last live readings (see readLive).
	live map[string]liveReading
	// stale is set when the last sample missed a pod: the pod list may be out
	// of date (a rollout replaced the pods), so it is listed again at once.
	stale bool
}

// buffers holds every experiment's pending samples.
type buffers struct {
	mu sync.Mutex
	m  map[types.NamespacedName]*pending
}

func (b *buffers) get(key types.NamespacedName) *pending {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m == nil {
		b.m = map[types.NamespacedName]*pending{}
	}
	p := b.m[key]
	if p == nil {
		p = &pending{}
		b.m[key] = p
	}
	return p
}

func (b *buffers) drop(key types.NamespacedName) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.m, key)
}

// sample takes a sample when one is due and hands every pending sample to the
// engine. A failing source becomes a recorded failure, never a reconcile error:
// a metrics outage marks windows, it does not stop the run.
func (r *PerfExperimentReconciler) sample(ctx context.Context, s *scope) {
	exp, obs := s.exp, &s.obs
	key := client.ObjectKeyFromObject(exp)
	p := r.samples.get(key)
	now := obs.Now
	if engine.SampleDue(exp, p.last, now) {
		if p.taken%RefreshPodsEvery == 0 || p.podNames == nil || p.stale {
			r.refreshPods(ctx, s, p)
		}
		p.stale = false
		if err := r.takeSample(ctx, s, p, now); err != nil {
			p.failures = append(p.failures, engine.SampleFailure{Time: now, Message: err.Error()})
		}
		// The load is judged with every sample, on the readings of this one.
		obs.Live = r.readLive(ctx, exp, p)
		p.last = now
		p.taken++
	}
	obs.Samples, obs.SampleFailures, obs.LastPendingSample, obs.Pods = p.samples, p.failures, p.last, p.pods
	obs.ToggleError = p.toggleError
}

func (r *PerfExperimentReconciler) takeSample(ctx context.Context, s *scope, p *pending, now time.Time) error {
	exp := s.exp
	if p.provider == nil {
		if r.Metrics == nil {
			return fmt.Errorf("no metrics source configured")
		}
		choose := func() (metrics.Provider, error) {
			prov, _, err := r.Metrics.Provider(ctx, exp.Spec.Metrics)
			return prov, err
		}
		if r.ShareMetrics {
			// Experiments with the same spec.metrics share the choice of
			// source and their queries.
			prov, err := r.sharedMetrics.provider(exp.Spec.Metrics, r.Clock.Now(), choose)
			if err != nil {
				return err
			}
			p.provider = r.sharedMetrics.wrap(prov, exp, s.container, r.Clock.Now)
		} else {
			prov, err := choose()
			if err != nil {
				return err
			}
			p.provider = prov
		}
	}
	if s.target == nil {
		return fmt.Errorf("the target Deployment %q is gone", exp.Spec.Target.Deployment)
	}
	t := metrics.Target{Namespace: exp.Namespace, Pods: p.podNames, PodSelector: s.selector.String(), Container: s.container}
	qctx, cancel := context.WithTimeout(ctx, SampleTimeout)
	defer cancel()
	got, err := p.provider.Sample(qctx, t)
	if err != nil {
		return fmt.Errorf("%s: %w", p.provider.Name(), err)
	}
	if len(got) == 0 {
		p.stale = true
		return fmt.Errorf("%s returned no samples for the target's pods", p.provider.Name())
	}
	for i := range got {
		got[i].Time = now // one instant per sample, on the operator's clock
	}
	complete := metrics.Expect(got, p.ready)
	p.samples = append(p.samples, complete...)
	if len(complete) > len(got) {
		p.stale = true
	}
	return nil
}

// refreshPods lists the target's pods (through the scope: once per reconcile)
// for their names and the named container's restart states.
func (r *PerfExperimentReconciler) refreshPods(ctx context.Context, s *scope, p *pending) {
	live, err := s.livePods(ctx, r.APIReader)
	if err != nil || s.target == nil {
		return
	}
	p.pods, p.podNames, p.ready = nil, []string{}, nil
	for _, pod := range live {
		p.podNames = append(p.podNames, pod.Name)
		p.pods = append(p.pods, podState(&pod, s.container))
		if podReady(&pod) {
			p.ready = append(p.ready, pod.Name)
		}
	}
}

// podState is the named container's state in a pod: restarts and OOM kills
// are judged on the container that is toggled and measured, found by name
// (the kubelet orders container statuses by name, not as in the template).
func podState(pod *corev1.Pod, container string) guardrail.PodState {
	s := guardrail.PodState{Name: pod.Name}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name != container {
			continue
		}
		s.Restarts = cs.RestartCount
		if t := cs.LastTerminationState.Terminated; t != nil && t.Reason == "OOMKilled" {
			s.OOMKilled = true
		}
		if t := cs.State.Terminated; t != nil && t.Reason == "OOMKilled" {
			s.OOMKilled = true
		}
		if r := cs.State.Running; r != nil {
			s.StartedAt = r.StartedAt.Time
		}
	}
	return s
}

// flushDue reports whether the status must be written: anything but samples
// changed, enough samples wait, or the run is no longer sampling.
func flushDue(before, after *perfv1.PerfExperimentStatus, p *pending) bool {
	return len(p.samples) == 0 || len(p.failures) > 0 || p.taken%FlushEvery == 0 || !equalButSamples(before, after)
}

// equalButSamples compares two statuses ignoring what samples change: the
// measurement state and the windows' series.
func equalButSamples(a, b *perfv1.PerfExperimentStatus) bool {
	x, y := a.DeepCopy(), b.DeepCopy()
	for _, s := range []*perfv1.PerfExperimentStatus{x, y} {
		s.Measurement = nil
		for i := range s.Windows {
			s.Windows[i].Series = nil
		}
	}
	return equality.Semantic.DeepEqual(x, y)
}

// flushed forgets the samples now persisted.
func (p *pending) flushed() {
	p.samples, p.failures = nil, nil
}

// judged counts the sample instants this write persisted that the guardrails
// judged: those taken after the last persisted sample, from the first toggle on.
func judged(before, after *perfv1.PerfExperimentStatus, p *pending) int {
	if after.Toggle == nil || after.Toggle.AppliedAt == nil {
		return 0
	}
	var since time.Time
	if m := before.Measurement; m != nil && m.LastSampleTime != nil {
		since = m.LastSampleTime.Time
	}
	seen := map[time.Time]bool{}
	for _, s := range p.samples {
		if s.Time.After(since) && !s.Time.Before(after.Toggle.AppliedAt.Time) {
			seen[s.Time] = true
		}
	}
	return len(seen)
}
