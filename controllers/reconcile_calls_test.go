package controllers_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
	"perfexp.dev/perf-operator/controllers"
)

// calls counts reads by kind and name ("v1.Deployment/app", "v1.PodList").
type calls struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *calls) add(k string) {
	c.mu.Lock()
	c.n[k]++
	c.mu.Unlock()
}

func (c *calls) reset() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.n
	c.n = map[string]int{}
	return out
}

func kindOf(o any) string { return fmt.Sprintf("%T", o)[1:] }

type countingClient struct {
	client.Client
	c *calls
}

func (w countingClient) Status() client.SubResourceWriter {
	return countingStatus{SubResourceWriter: w.Client.Status(), c: w.c}
}

func (w countingClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	w.c.add("update " + kindOf(obj))
	return w.Client.Update(ctx, obj, opts...)
}

func (w countingClient) Patch(ctx context.Context, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
	w.c.add("patch " + kindOf(obj))
	return w.Client.Patch(ctx, obj, p, opts...)
}

type countingStatus struct {
	client.SubResourceWriter
	c *calls
}

func (w countingStatus) Patch(ctx context.Context, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
	w.c.add("patch status")
	return w.SubResourceWriter.Patch(ctx, obj, p, opts...)
}

func (w countingClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	w.c.add(kindOf(obj) + "/" + key.Name)
	return w.Client.Get(ctx, key, obj, opts...)
}

func (w countingClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	w.c.add(kindOf(list))
	return w.Client.List(ctx, list, opts...)
}

type countingReader struct {
	client.Reader
	c *calls
}

func (w countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	w.c.add(kindOf(obj) + "/" + key.Name)
	return w.Reader.Get(ctx, key, obj, opts...)
}

func (w countingReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	w.c.add(kindOf(list))
	return w.Reader.List(ctx, list, opts...)
}

// handClients are the production caches (with the reconciler's indexes) and
// the uncached reader, for a reconciler called by hand: the manager's
// controller is registered but never started.
func handClients(t *testing.T) (client.Client, client.Reader) {
	t.Helper()
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme: scheme, Cache: controllers.CacheOptions(), Controller: ctrlConfig(),
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := (&controllers.PerfExperimentReconciler{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = mgr.GetCache().Start(ctx) }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		t.Fatal("caches never synced")
	}
	return mgr.GetClient(), mgr.GetAPIReader()
}

// cached waits until the cache has the experiment as the API server has it.
func cached(t *testing.T, c client.Client, key client.ObjectKey) {
	t.Helper()
	want := &perfv1.PerfExperiment{}
	if err := k8s.Get(context.Background(), key, want); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 200; i++ {
		got := &perfv1.PerfExperiment{}
		if err := c.Get(context.Background(), key, got); err == nil && got.ResourceVersion == want.ResourceVersion {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the cache never caught up with %s", key)
}

// One reconcile reads the target Deployment at most once from the API server
// (and at most once more from the cache), and lists its pods at most once,
// whatever it does: preflight with the lock and the first Job, sampling, the
// toggle. The reconciler is called by hand against the real API server, one
// reconcile at a time, on a fake clock.
func TestAReconcileReadsEachObjectOnce(t *testing.T) {
	fromCacheCalls := &calls{n: map[string]int{}}
	clock, c, cc, uncached, r, req := handRun(t, fromCacheCalls)
	seen := map[perfv1.Phase]bool{}
	checkedJobs := 0
	for i := 0; i < 400 && !c.experiment("overhead").Status.Phase.IsTerminal(); i++ {
		cached(t, cc, req.NamespacedName)
		fromCacheCalls.reset()
		uncached.reset()
		if _, err := r.Reconcile(context.Background(), req); err != nil {
			t.Fatalf("reconcile %d: %v", i, err)
		}
		fromCache, fromAPI := fromCacheCalls.reset(), uncached.reset()
		phase := c.experiment("overhead").Status.Phase
		seen[phase] = true
		if n := fromAPI[kindOf(&appsv1.Deployment{})+"/app"]; n > 1 {
			t.Errorf("reconcile %d (%s): the target read %d times from the API server", i, phase, n)
		}
		if n := fromCache[kindOf(&appsv1.Deployment{})+"/app"]; n > 1 {
			t.Errorf("reconcile %d (%s): the target read %d times from the cache", i, phase, n)
		}
		if n := fromAPI[kindOf(&corev1.PodList{})]; n > 1 {
			t.Errorf("reconcile %d (%s): the target's pods listed %d times", i, phase, n)
		}
		if n := fromCache[kindOf(&batchv1.JobList{})]; n > 1 {
			t.Errorf("reconcile %d (%s): Jobs listed %d times", i, phase, n)
		}
		if n := fromCache[kindOf(&perfv1.PerfExperiment{})+"/overhead"]; n > 1 {
			t.Errorf("reconcile %d (%s): the experiment read %d times", i, phase, n)
		}
		// Every Job, the first one included, keeps off the target's pods.
		var jobs batchv1.JobList
		if err := k8s.List(context.Background(), &jobs, client.InNamespace(c.ns)); err != nil {
			t.Fatal(err)
		}
		for _, j := range jobs.Items {
			if a := j.Spec.Template.Spec.Affinity; a == nil || a.PodAntiAffinity == nil {
				t.Errorf("Job %s has no anti-affinity to the target's pods", j.Name)
			}
			checkedJobs++
		}
		c.tick()
		if i%2 == 1 {
			clock.Step(step)
		}
	}
	for _, p := range []perfv1.Phase{perfv1.PhaseBaseline, perfv1.PhaseTreatment, perfv1.PhaseSucceeded} {
		if !seen[p] {
			t.Errorf("the run never reached %s (saw %v)", p, seen)
		}
	}
	if checkedJobs == 0 {
		t.Error("no Job was seen")
	}
}

// A waiting experiment costs nothing while its inputs stay as they are: the
// reconcile that stalls it writes the status once and asks for no requeue (the
// target's events wake it), and a reconcile with nothing changed writes nothing.
// A new experiment gets its finalizer and its first status in one reconcile.
func TestAWaitingExperimentCostsNothing(t *testing.T) {
	clock := newTestClock()
	c := newCluster(t, clock)
	dep := c.target("app")
	dep.Spec.Template.Spec.Containers[0].Resources.Limits = nil // preflight stalls: no limits
	if err := k8s.Update(context.Background(), dep); err != nil {
		t.Fatal(err)
	}
	writes := &calls{n: map[string]int{}}
	cc, api := handClients(t)
	r := &controllers.PerfExperimentReconciler{
		Client: countingClient{Client: cc, c: writes}, APIReader: api,
		Scheme: scheme, Recorder: record.NewFakeRecorder(1000), Clock: clock, Metrics: metricsFor(clock),
	}
	e := shortExperiment(c.ns, "app", envToggle())
	if err := k8s.Create(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(e)}
	cached(t, cc, req.NamespacedName)
	writes.reset()
	res, err := r.Reconcile(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	first := writes.reset()
	exp := c.experiment("overhead")
	if exp.Status.Phase != perfv1.PhasePending || len(exp.Finalizers) != 1 {
		t.Fatalf("after one reconcile: phase %q finalizers %v", exp.Status.Phase, exp.Finalizers)
	}
	if first["update v1alpha1.PerfExperiment"] != 1 || first["patch status"] != 1 {
		t.Errorf("first reconcile wrote %v; want the finalizer and the status, once each", first)
	}
	if res.RequeueAfter != 0 || res.Requeue {
		t.Errorf("a stalled experiment asks to be requeued: %+v", res)
	}
	for i := 0; i < 3; i++ {
		clock.Step(time.Minute)
		cached(t, cc, req.NamespacedName)
		writes.reset()
		if _, err := r.Reconcile(context.Background(), req); err != nil {
			t.Fatal(err)
		}
		if w := writes.reset(); w["patch status"]+w["update v1alpha1.PerfExperiment"] != 0 {
			t.Errorf("reconcile %d with nothing changed wrote %v", i, w)
		}
	}
}

// An experiment that has ended, with its toggle switched back and its target
// released, reads the target no more: the reconciles its Jobs' deletions
// cause make no uncached read.
func TestAFinishedExperimentLeavesItsTargetAlone(t *testing.T) {
	clock, c, cc, uncached, r, req := handRun(t, nil)
	for i := 0; i < 400 && !c.experiment("overhead").Status.Phase.IsTerminal(); i++ {
		cached(t, cc, req.NamespacedName)
		if _, err := r.Reconcile(context.Background(), req); err != nil {
			t.Fatalf("reconcile %d: %v", i, err)
		}
		c.tick()
		if i%2 == 1 {
			clock.Step(step)
		}
	}
	if p := c.experiment("overhead").Status.Phase; p != perfv1.PhaseSucceeded {
		t.Fatalf("the run ended %s", p)
	}
	for i := 0; i < 3; i++ {
		cached(t, cc, req.NamespacedName)
		uncached.reset()
		if _, err := r.Reconcile(context.Background(), req); err != nil {
			t.Fatal(err)
		}
		if n := uncached.reset()[kindOf(&appsv1.Deployment{})+"/app"]; n != 0 {
			t.Errorf("reconcile %d after the ending read the released target %d times from the API server", i, n)
		}
		c.tick()
		clock.Step(step)
	}
	got := &appsv1.Deployment{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: c.ns, Name: "app"}, got); err != nil {
		t.Fatal(err)
	}
	if got.Labels[perfv1.LabelExperiment] != "" || got.Annotations[perfv1.AnnotationLock] != "" {
		t.Errorf("the target is still held: labels %v annotations %v", got.Labels, got.Annotations)
	}
}

// handRun creates the one experiment these tests drive by hand (three stages
// of an http toggle, no settle) on a target with ready pods, and the
// reconciler they call: its uncached reads are counted, and its cached ones
// too when fromCache is set. cc is the cache the reconciler reads.
func handRun(t *testing.T, fromCache *calls) (*clocktesting.FakeClock, *cluster, client.Client, *calls, *controllers.PerfExperimentReconciler, ctrl.Request) {
	t.Helper()
	clock := newTestClock()
	c := newCluster(t, clock)
	dep := c.target("app")
	targetPods(t, c.ns, dep)
	uncached := &calls{n: map[string]int{}}
	admin := newAdminServer(t, clock, "")
	cc, api := handClients(t)
	var reader client.Client = cc
	if fromCache != nil {
		reader = countingClient{Client: cc, c: fromCache}
	}
	r := &controllers.PerfExperimentReconciler{
		Client: reader, APIReader: countingReader{Reader: api, c: uncached},
		Scheme: scheme, Recorder: record.NewFakeRecorder(1000), Clock: clock, HTTP: admin.sender(), Metrics: metricsFor(clock),
	}
	e := shortExperiment(c.ns, "app", httpToggleSpec())
	e.Spec.Windows.Settle = "0s"
	if err := k8s.Create(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	return clock, c, cc, uncached, r, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(e)}
}
