package controllers

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
// every 15 s, the status is written two minutes after it was last written, and
// whenever anything but samples changes (a window, the toggle, a guardrail
// breach: at once, with the samples waiting); when such a change is due
// within an interval (a window's load ends), the samples wait for it, two
// intervals more at most. A restart loses at most the unwritten samples.
const FlushEvery = 8

// RefreshPodsEvery is how many samples at most reuse the target's pod list
// while nothing says the pods changed. The list (uncached: the target's pods
// carry no label of the operator's, so no cache filtered to held targets can
// hold them) is read again at the next sample whenever something says the pod
// set or the pods' states may have changed: the target Deployment's rollout
// state (its generation, replicas, updated, ready, available and unavailable
// counts, from the cached target) moved, or a sample missed a pod. A container
// that restarts or is OOM-killed turns its pod NotReady, which moves the
// Deployment's ready count, so it is seen at the next sample; this count is
// the backstop for a restart too quick to show there (every four minutes
// sampling every 15 s). A list a runtime toggle's apply or revert read counts
// as one (notePods). At N=1000 the list every fourth sample was the largest
// share of the operator's requests (docs/scale.md).
const RefreshPodsEvery = 16

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
	// unflushed counts the samples taken since the status was last written.
	unflushed int
	pods      []guardrail.PodState
	podNames  []string
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
	// listedAt is the target's rollout state when its pods were last listed,
	// and sinceList how many samples reused that list.
	listedAt  podSetState
	sinceList int
	// written is the resourceVersion of this reconciler's last status write
	// (decidedOnCurrent).
	written string
	// hash is the held target's templateHash at version hashAt of the
	// Deployment hashOf (heldTemplateHash).
	hashOf       types.UID
	hashAt, hash string
	// joined is set once the first sample has asked to join the shared
	// metrics query (joinShared): it waits for it at most once.
	joined bool
}

// podSetState is what of a target Deployment moves when its pods come, go,
// or change readiness: a pod list taken at one state stays good until the
// state moves (or RefreshPodsEvery samples later).
type podSetState struct {
	generation, observed                             int64
	replicas, updated, ready, available, unavailable int32
}

func podSetOf(dep *appsv1.Deployment) podSetState {
	if dep == nil {
		return podSetState{}
	}
	st := dep.Status
	return podSetState{generation: dep.Generation, observed: st.ObservedGeneration, replicas: st.Replicas,
		updated: st.UpdatedReplicas, ready: st.ReadyReplicas, available: st.AvailableReplicas, unavailable: st.UnavailableReplicas}
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

// peek returns key's pending samples, nil when there are none.
func (b *buffers) peek(key types.NamespacedName) *pending {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.m[key]
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
	if due, ok := engine.NextSample(exp, p.last); ok && !now.Before(due) {
		if p.podNames == nil || p.stale || p.sinceList >= RefreshPodsEvery || p.listedAt != podSetOf(s.target) {
			r.refreshPods(ctx, s, p)
		}
		p.stale = false
		err := r.ensureProvider(ctx, s, p)
		if err == nil && p.taken == 0 && !p.joined && !toggleOn(&exp.Status) {
			p.joined = true
			if due, interval := r.joinShared(ctx, s, p); due.After(now) {
				// The first sample waits for the next shared fetch instead of
				// querying alone: the wake for the next sample is then.
				p.last = due.Add(-interval)
				obs.Samples, obs.SampleFailures, obs.LastPendingSample, obs.Pods = p.samples, p.failures, p.last, p.pods
				obs.ToggleError = p.toggleError
				return
			}
		}
		at := now
		if err == nil {
			at, err = r.takeSample(ctx, s, p, now, due)
		}
		if err != nil {
			p.failures = append(p.failures, engine.SampleFailure{Time: now, Message: err.Error()})
		}
		// The load is judged with every sample, on the readings of this one.
		obs.Live = r.readLive(ctx, s.k6Pods, p)
		p.last = at
		p.taken++
		p.unflushed++
		p.sinceList++
	}
	obs.Samples, obs.SampleFailures, obs.LastPendingSample, obs.Pods = p.samples, p.failures, p.last, p.pods
	obs.ToggleError = p.toggleError
}

// ensureProvider resolves the experiment's metrics provider once: it keeps
// the one it started with for its whole run.
func (r *PerfExperimentReconciler) ensureProvider(ctx context.Context, s *scope, p *pending) error {
	if p.provider != nil {
		return nil
	}
	exp := s.exp
	if r.Metrics == nil {
		return fmt.Errorf("no metrics source configured")
	}
	choose := func() (metrics.Provider, error) {
		prov, _, err := r.Metrics.Provider(ctx, exp.Spec.Metrics)
		return prov, err
	}
	if !r.ShareMetrics {
		prov, err := choose()
		if err != nil {
			return err
		}
		p.provider = prov
		return nil
	}
	// Experiments with the same spec.metrics share the choice of source and
	// their queries.
	prov, err := r.sharedMetrics.provider(exp.Spec.Metrics, r.Clock.Now(), choose)
	if err != nil {
		return err
	}
	p.provider = r.sharedMetrics.wrap(prov, exp, s.container, r.Clock.Now)
	return nil
}

// joinShared puts an experiment's pods into its shared metrics query and
// returns when that query's next fetch is due, with the sampling interval,
// if the last fetch is too recent to be repeated and lacks the pods; the zero
// time when the sample can be taken now without a query of its own (or
// sharing is off). An experiment's first sample would otherwise query alone: at N=1000
// those were nearly all the metrics queries (docs/scale.md). The wait is at
// most one interval, to the group's next fetch, and never while a toggle is
// on: only the first sample of a run, or of a restarted operator before its
// run's toggle went on, waits.
func (r *PerfExperimentReconciler) joinShared(ctx context.Context, s *scope, p *pending) (time.Time, time.Duration) {
	sp, ok := p.provider.(*sharedProvider)
	if !ok || s.target == nil {
		return time.Time{}, 0
	}
	return sp.joinNext(ctx, metrics.Target{Namespace: s.exp.Namespace, Pods: p.podNames, Container: s.container}), sp.interval
}

// takeSample queries the metrics for a sample due at due and returns its
// instant: now, or the time of the shared fetch it was answered from
// (sharedProvider.sampleAt), on the operator's clock either way.
func (r *PerfExperimentReconciler) takeSample(ctx context.Context, s *scope, p *pending, now, due time.Time) (time.Time, error) {
	exp := s.exp
	if s.target == nil {
		return now, fmt.Errorf("the target Deployment %q is gone", exp.Spec.Target.Deployment)
	}
	t := metrics.Target{Namespace: exp.Namespace, Pods: p.podNames, PodSelector: s.selector.String(), Container: s.container}
	qctx, cancel := context.WithTimeout(ctx, SampleTimeout)
	defer cancel()
	var got []metrics.Sample
	var err error
	at := now
	if sp, ok := p.provider.(*sharedProvider); ok {
		var fetched time.Time
		if got, fetched, err = sp.sampleAt(qctx, t, due); !fetched.IsZero() {
			at = fetched
		}
	} else {
		got, err = p.provider.Sample(qctx, t)
	}
	if err != nil {
		return now, fmt.Errorf("%s: %w", p.provider.Name(), err)
	}
	if len(got) == 0 {
		p.stale = true
		return now, fmt.Errorf("%s returned no samples for the target's pods", p.provider.Name())
	}
	for i := range got {
		got[i].Time = at // one instant per sample, on the operator's clock
	}
	for _, smp := range got {
		if !slices.Contains(p.podNames, smp.Pod) {
			p.stale = true // a pod not in the list: list again
		}
	}
	complete := metrics.Expect(got, p.ready)
	p.samples = append(p.samples, complete...)
	if len(complete) > len(got) {
		p.stale = true
	}
	return at, nil
}

// refreshPods lists the target's pods (through the scope: once per reconcile)
// for their names and the named container's restart states.
func (r *PerfExperimentReconciler) refreshPods(ctx context.Context, s *scope, p *pending) {
	live, err := s.livePods(ctx, r.APIReader)
	if err != nil || s.target == nil {
		return
	}
	p.pods, p.podNames, p.ready = nil, []string{}, nil
	p.listedAt, p.sinceList = podSetOf(s.target), 0
	for _, pod := range live {
		p.podNames = append(p.podNames, pod.Name)
		p.pods = append(p.pods, podState(&pod, s.container))
		if podReady(&pod) {
			p.ready = append(p.ready, pod.Name)
		}
	}
}

// notePods hands a pod list the reconcile read for its actions (a runtime
// toggle's apply or revert lists the pods it switches) to the sampling too, as
// if it had been read for it: the same list at the same moment, so the next
// samples need no list of their own until something says the pods changed
// (at N=1000, RefreshPodsEvery's backstop read the pods once more in most
// runs, docs/scale.md).
func (r *PerfExperimentReconciler) notePods(ctx context.Context, s *scope) {
	if !s.podsRead || s.target == nil {
		return
	}
	if p := r.samples.peek(client.ObjectKeyFromObject(s.exp)); p != nil && p.podNames != nil {
		r.refreshPods(ctx, s, p)
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
// changed, enough samples wait, or the run is no longer sampling. Enough
// samples wait when the status is due to change within an interval anyway
// (changeSoon): a window of FlushEvery intervals would otherwise be
// written twice within seconds at its end, its samples alone and then its
// closing (docs/scale.md).
func flushDue(before, after *perfv1.PerfExperimentStatus, p *pending, changeSoon bool) bool {
	if len(p.samples) == 0 || len(p.failures) > 0 || !equalButSamples(before, after) {
		return true
	}
	return p.unflushed >= FlushEvery && !changeSoon
}

// changeSoon reports whether the decision says the status changes within one
// sampling interval of now (engine.Decision.ChangesAt: the open window's load
// ends, a settle period or an interleaved slot is over), or was due to less
// than an interval ago and has not been seen yet (the Job's completion is
// still on its way to the cache). Samples held for that change wait at most
// two intervals more: a change later than that no longer holds them.
func changeSoon(spec *perfv1.PerfExperimentSpec, d engine.Decision, now time.Time) bool {
	if d.ChangesAt.IsZero() {
		return false
	}
	interval, err := spec.Metrics.Interval.Parse()
	if err != nil || interval <= 0 {
		return false
	}
	in := d.ChangesAt.Sub(now)
	return in >= -interval && in <= interval
}

// equalButSamples compares two statuses ignoring what samples change: the
// measurement state, the windows' series, and the MetricsAvailable condition
// that the first sample of a run sets True (the samples' own news: it is
// written with them, two minutes later at most; a condition that flips, as
// after an outage, is written at once). It runs at every sample, so it
// compares shallow copies instead of deep ones.
func equalButSamples(a, b *perfv1.PerfExperimentStatus) bool {
	x, y := *a, *b
	x.Measurement, y.Measurement = nil, nil
	x.Windows, y.Windows = withoutSeries(a.Windows), withoutSeries(b.Windows)
	y.Conditions = withoutFirstMetrics(a.Conditions, b.Conditions)
	return sameStatus(&x, &y)
}

// sameStatus reports whether two statuses are semantically equal (what
// equality.Semantic says: equal times in other locations, equal quantities,
// nil and empty lists). It runs several times per reconcile, and Semantic's
// reflection calls its equality functions through reflect.Value.Call, which
// allocates (5 % of the allocations at N=1000, docs/scale.md); the usual
// answer — a status copied and left as it was — is found by reflect.DeepEqual
// without that, and only statuses that differ in their representation take
// the semantic comparison.
func sameStatus(a, b *perfv1.PerfExperimentStatus) bool {
	return reflect.DeepEqual(a, b) || equality.Semantic.DeepEqual(a, b)
}

// withoutFirstMetrics returns after without its MetricsAvailable condition
// when that condition is True and before has none; after otherwise.
func withoutFirstMetrics(before, after []metav1.Condition) []metav1.Condition {
	if meta.FindStatusCondition(before, perfv1.ConditionMetricsAvailable) != nil {
		return after
	}
	c := meta.FindStatusCondition(after, perfv1.ConditionMetricsAvailable)
	if c == nil || c.Status != metav1.ConditionTrue {
		return after
	}
	out := make([]metav1.Condition, 0, len(after)-1)
	for _, c := range after {
		if c.Type != perfv1.ConditionMetricsAvailable {
			out = append(out, c)
		}
	}
	return out
}

func withoutSeries(ws []perfv1.WindowStatus) []perfv1.WindowStatus {
	if ws == nil {
		return nil
	}
	out := make([]perfv1.WindowStatus, len(ws))
	for i := range ws {
		out[i] = ws[i]
		out[i].Series = nil
	}
	return out
}

// flushed forgets the samples now persisted.
func (p *pending) flushed() {
	p.samples, p.failures, p.unflushed = nil, nil, 0
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
