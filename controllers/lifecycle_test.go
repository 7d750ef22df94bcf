package controllers_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
	"perfexp.dev/perf-operator/internal/k6"
)

// step is the fake clock's tick: short windows (20 s, the CRD's minimum) make a
// three-stage run a few dozen ticks.
const step = 5 * time.Second

// shortExperiment is a three-stage run with the shortest windows the CRD allows.
func shortExperiment(ns, target string, t perfv1.ToggleSpec) *perfv1.PerfExperiment {
	return &perfv1.PerfExperiment{
		ObjectMeta: metav1.ObjectMeta{Name: "overhead", Namespace: ns},
		Spec: perfv1.PerfExperimentSpec{
			Target:  perfv1.TargetSpec{Deployment: target, URL: "http://" + target + ":8080"},
			Load:    perfv1.LoadSpec{Requests: []perfv1.RequestSpec{{Path: "/a", Weight: 3}, {Path: "/b", Weight: 1}}},
			Warmup:  &perfv1.WarmupSpec{QPS: 20, Duration: "10s"},
			Stages:  []perfv1.StageSpec{{QPS: 100}, {QPS: 200}, {QPS: 400}},
			Windows: perfv1.WindowsSpec{Baseline: "20s", Treatment: "20s", Settle: "10s"},
			Metrics: perfv1.MetricsSpec{Interval: "5s"},
			Toggle:  &t,
		},
	}
}

func envToggle() perfv1.ToggleSpec {
	v := "on"
	return perfv1.ToggleSpec{Env: &perfv1.EnvToggle{Name: "PROFILING", Value: &v}}
}

// driver runs an experiment against the simulated cluster.
type driver struct {
	t     *testing.T
	c     *cluster
	clock *clocktesting.FakeClock
	op    *operator
	name  string
	// restartOnPhaseChange stops the operator and starts a new one whenever the
	// phase changes: a crash at every phase boundary.
	restartOnPhaseChange bool
	restarts             int
	phases               []perfv1.Phase
	// step overrides the fake clock's tick (default: step).
	step time.Duration
	// rt are the runtime-toggle senders the operator (and each restart) gets.
	rt runtimeToggles
}

func (d *driver) stepSize() time.Duration {
	if d.step > 0 {
		return d.step
	}
	return step
}

func newDriver(t *testing.T) *driver {
	return newDriverWith(t, newTestClock(), runtimeToggles{})
}

func newTestClock() *clocktesting.FakeClock {
	return clocktesting.NewFakeClock(time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC))
}

// newDriverWith starts an operator with the given clock and runtime-toggle sender
// against a fresh simulated cluster, and stops it when the test ends.
func newDriverWith(t *testing.T, clock *clocktesting.FakeClock, rt runtimeToggles) *driver {
	d := &driver{t: t, c: newCluster(t, clock), clock: clock, name: "overhead", rt: rt}
	d.op = startOperator(t, clock, rt)
	t.Cleanup(func() {
		if d.op != nil {
			d.op.stop(t)
		}
	})
	return d
}

// until ticks the simulated cluster and the fake clock until cond holds.
func (d *driver) until(what string, cond func(*perfv1.PerfExperiment) bool) *perfv1.PerfExperiment {
	d.t.Helper()
	for i := 0; i < 600; i++ {
		d.c.tick()
		time.Sleep(50 * time.Millisecond) // let the operator react to the tick's events
		exp := d.c.experiment(d.name)
		d.assertCacheAsSent(exp)
		if n := len(d.phases); n == 0 || d.phases[n-1] != exp.Status.Phase {
			d.phases = append(d.phases, exp.Status.Phase)
			if d.restartOnPhaseChange && n > 0 {
				d.op.stop(d.t)
				d.restarts++
				d.op = startOperator(d.t, d.clock, d.rt)
			}
		}
		if cond(exp) {
			return exp
		}
		if i%4 == 3 {
			d.clock.Step(d.stepSize())
			d.c.poke(d.name)
		}
	}
	exp := d.c.experiment(d.name)
	d.t.Fatalf("%s never happened; phase %s, conditions %+v", what, exp.Status.Phase, exp.Status.Conditions)
	return nil
}

// assertCacheAsSent fails when the operator's cached copy of the experiment
// differs from the API server's at the same resourceVersion: the reconciler
// reads the cache without copies (CacheOptions, decisionCopy), so a write into
// what it read would show here.
func (d *driver) assertCacheAsSent(sent *perfv1.PerfExperiment) {
	d.t.Helper()
	if d.op == nil {
		return // the test runs its own manager
	}
	cached := &perfv1.PerfExperiment{}
	if err := d.op.cache.Get(context.Background(), client.ObjectKeyFromObject(sent), cached); err != nil || cached.ResourceVersion != sent.ResourceVersion {
		return // not cached yet, or another version: nothing to compare
	}
	// The cache keeps no managedFields (CacheOptions) and sets the kind.
	cached.TypeMeta, cached.ManagedFields = metav1.TypeMeta{}, nil
	cmp := *sent
	cmp.TypeMeta, cmp.ManagedFields = metav1.TypeMeta{}, nil
	got, _ := json.Marshal(cached)
	want, _ := json.Marshal(&cmp)
	if string(got) != string(want) {
		d.t.Fatalf("the operator's cache changed its experiment at resourceVersion %s:\ncached %s\nsent   %s", sent.ResourceVersion, got, want)
	}
}

func phaseIs(p perfv1.Phase) func(*perfv1.PerfExperiment) bool {
	return func(e *perfv1.PerfExperiment) bool { return e.Status.Phase == p }
}

func terminal(e *perfv1.PerfExperiment) bool { return e.Status.Phase.IsTerminal() }

// assertRestored checks that the target is exactly as before and nothing is left.
func (d *driver) assertRestored(before string, target string) {
	d.t.Helper()
	// Cleanup may finish a reconcile after the terminal status write.
	var after string
	for i := 0; i < 100; i++ {
		after = templateJSON(d.t, d.c.ns, target)
		dep := &appsv1.Deployment{}
		_ = k8s.Get(context.Background(), client.ObjectKey{Namespace: d.c.ns, Name: target}, dep)
		var jobs batchv1.JobList
		_ = k8s.List(context.Background(), &jobs, client.InNamespace(d.c.ns))
		live := 0
		for _, j := range jobs.Items {
			if j.DeletionTimestamp == nil {
				live++
			}
		}
		if after == before && dep.Annotations[perfv1.AnnotationLock] == "" && dep.Labels[perfv1.LabelExperiment] == "" && live == 0 {
			if dep.Annotations["team"] != "payments" || len(dep.Annotations) != 1 {
				d.t.Fatalf("target annotations not restored: %v", dep.Annotations)
			}
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	d.t.Fatalf("target not restored:\nbefore %s\nafter  %s", before, after)
}

func TestFullRunSucceedsAndRestoresTheTarget(t *testing.T) {
	d := newDriver(t)
	dep := d.c.target("app")
	before := templateJSON(t, d.c.ns, "app")
	gen := dep.Generation
	if err := k8s.Create(context.Background(), shortExperiment(d.c.ns, "app", envToggle())); err != nil {
		t.Fatal(err)
	}
	exp := d.until("Succeeded", terminal)
	if exp.Status.Phase != perfv1.PhaseSucceeded {
		t.Fatalf("phase %s: %+v", exp.Status.Phase, exp.Status.Abort)
	}
	d.assertRestored(before, "app")
	assertWindows(t, exp, 3)
	if !meta.IsStatusConditionTrue(exp.Status.Conditions, perfv1.ConditionReady) ||
		meta.FindStatusCondition(exp.Status.Conditions, perfv1.ConditionReconciling) != nil {
		t.Fatalf("conditions of a finished run: %+v", exp.Status.Conditions)
	}
	if exp.Status.ObservedGeneration != exp.Generation {
		t.Fatalf("observedGeneration %d, generation %d", exp.Status.ObservedGeneration, exp.Generation)
	}
	// Three applies and three reverts, each one template change, plus the lock
	// and its release (Deployments count annotation changes as generations
	// too): no toggle applied twice.
	dep = &appsv1.Deployment{}
	_ = k8s.Get(context.Background(), client.ObjectKey{Namespace: d.c.ns, Name: "app"}, dep)
	if dep.Generation != gen+8 {
		t.Fatalf("target generation went %d → %d; want 6 template changes and the lock's 2", gen, dep.Generation)
	}
	if len(d.c.dupes) > 0 {
		t.Fatalf("Jobs created twice: %v", d.c.dupes)
	}
	reportOnFinishedRun(t, exp)
}

// assertWindows checks every measured window of a finished run carries results.
func assertWindows(t *testing.T, exp *perfv1.PerfExperiment, stages int) {
	t.Helper()
	measured := 0
	for _, w := range exp.Status.Windows {
		if w.Variant != perfv1.VariantBaseline && w.Variant != perfv1.VariantTreatment {
			continue
		}
		measured++
		if w.Load == nil || w.Start == nil || w.End == nil || w.Valid == nil || !*w.Valid {
			b, _ := json.Marshal(w)
			t.Errorf("window without valid results: %s", b)
		}
	}
	if measured != 2*stages {
		t.Fatalf("%d measured windows; want %d", measured, 2*stages)
	}
}

func TestAbortRevertsAtOnce(t *testing.T) {
	d := newDriver(t)
	d.c.target("app")
	before := templateJSON(t, d.c.ns, "app")
	if err := k8s.Create(context.Background(), shortExperiment(d.c.ns, "app", envToggle())); err != nil {
		t.Fatal(err)
	}
	d.until("treatment", phaseIs(perfv1.PhaseTreatment))
	if templateJSON(t, d.c.ns, "app") == before {
		t.Fatal("toggle not applied during treatment")
	}
	patch := []byte(`{"spec":{"abort":true}}`)
	exp := &perfv1.PerfExperiment{ObjectMeta: metav1.ObjectMeta{Namespace: d.c.ns, Name: d.name}}
	if err := k8s.Patch(context.Background(), exp, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		t.Fatal(err)
	}
	exp = d.until("Aborted", terminal)
	if exp.Status.Phase != perfv1.PhaseAborted || exp.Status.Abort == nil || exp.Status.Abort.Reason != perfv1.ReasonAbortRequested {
		t.Fatalf("phase %s abort %+v", exp.Status.Phase, exp.Status.Abort)
	}
	if !meta.IsStatusConditionTrue(exp.Status.Conditions, perfv1.ConditionStalled) {
		t.Fatalf("an aborted run must read as Stalled (kstatus Failed): %+v", exp.Status.Conditions)
	}
	d.assertRestored(before, "app")
}

func TestDeletionMidRolloutRevertsAndRemovesJobs(t *testing.T) {
	d := newDriver(t)
	d.c.target("app")
	before := templateJSON(t, d.c.ns, "app")
	if err := k8s.Create(context.Background(), shortExperiment(d.c.ns, "app", envToggle())); err != nil {
		t.Fatal(err)
	}
	d.until("switching", phaseIs(perfv1.PhaseSwitching))
	d.c.stuck = true // the rollout hangs: deletion must not wait for it
	exp := d.c.experiment(d.name)
	if err := k8s.Delete(context.Background(), exp); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 200; i++ {
		err := k8s.Get(context.Background(), client.ObjectKeyFromObject(exp), exp)
		if client.IgnoreNotFound(err) != nil {
			t.Fatal(err)
		}
		if err != nil {
			d.assertRestored(before, "app")
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("experiment not deleted; finalizers %v", exp.Finalizers)
}

func TestStuckRolloutAbortsAndReverts(t *testing.T) {
	d := newDriver(t)
	d.c.target("app")
	before := templateJSON(t, d.c.ns, "app")
	e := shortExperiment(d.c.ns, "app", envToggle())
	e.Spec.Guardrails.RolloutTimeout = "30s"
	if err := k8s.Create(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	d.until("baseline", phaseIs(perfv1.PhaseBaseline))
	d.c.stuck = true
	exp := d.until("Aborted", terminal)
	if exp.Status.Abort == nil || exp.Status.Abort.Reason != perfv1.ReasonRolloutStuck || !strings.Contains(exp.Status.Abort.Message, "30s") {
		t.Fatalf("phase %s abort %+v", exp.Status.Phase, exp.Status.Abort)
	}
	d.assertRestored(before, "app")
}

func TestOperatorRestartAtEveryPhaseBoundary(t *testing.T) {
	d := newDriver(t)
	d.restartOnPhaseChange = true
	d.c.target("app")
	before := templateJSON(t, d.c.ns, "app")
	e := shortExperiment(d.c.ns, "app", envToggle())
	e.Spec.Cleanup.Jobs = perfv1.JobsPolicyKeep // keep every Job to count them at the end
	if err := k8s.Create(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	exp := d.until("Succeeded", terminal)
	if exp.Status.Phase != perfv1.PhaseSucceeded {
		t.Fatalf("phase %s: %+v", exp.Status.Phase, exp.Status.Abort)
	}
	if d.restarts < 10 {
		t.Fatalf("only %d restarts over phases %v", d.restarts, d.phases)
	}
	assertWindows(t, exp, 3)
	if len(d.c.dupes) > 0 {
		t.Fatalf("Jobs created twice across restarts: %v", d.c.dupes)
	}
	var jobs batchv1.JobList
	_ = k8s.List(context.Background(), &jobs, client.InNamespace(d.c.ns))
	measured := 0
	for _, j := range jobs.Items {
		if j.Labels[k6.LabelVariant] != string(perfv1.VariantSettle) {
			measured++
		}
	}
	if measured != 7 { // warm-up + 3 × (baseline, treatment)
		t.Fatalf("%d measured Jobs kept; want 7", measured)
	}
	if templateJSON(t, d.c.ns, "app") != before {
		t.Fatal("target template changed")
	}
}

// A second experiment on a held target is queued, not stalled: Reconciling
// with reason Queued naming the holder.
func TestSecondExperimentOnTheSameTargetQueues(t *testing.T) {
	d := newDriver(t)
	d.c.target("app")
	if err := k8s.Create(context.Background(), shortExperiment(d.c.ns, "app", envToggle())); err != nil {
		t.Fatal(err)
	}
	d.until("baseline", phaseIs(perfv1.PhaseBaseline))
	second := shortExperiment(d.c.ns, "app", envToggle())
	second.Name = "second"
	if err := k8s.Create(context.Background(), second); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		exp := &perfv1.PerfExperiment{}
		_ = k8s.Get(context.Background(), client.ObjectKeyFromObject(second), exp)
		c := meta.FindStatusCondition(exp.Status.Conditions, perfv1.ConditionReconciling)
		if c != nil && c.Status == metav1.ConditionTrue && c.Reason == perfv1.ReasonQueued &&
			strings.Contains(c.Message, d.c.ns+"/overhead") {
			if s := meta.FindStatusCondition(exp.Status.Conditions, perfv1.ConditionStalled); s != nil {
				t.Fatalf("a queued experiment has Stalled %s", s.Status)
			}
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("second experiment was not queued naming the holder")
}

func TestMissingTargetAndMissingLimitsStall(t *testing.T) {
	d := newDriver(t)
	dep := d.c.target("nolimits")
	dep.Spec.Template.Spec.Containers[0].Resources.Limits = nil
	if err := k8s.Update(context.Background(), dep); err != nil {
		t.Fatal(err)
	}
	d.c.tick()
	for _, tc := range []struct{ name, target, reason string }{
		{"missing", "absent", perfv1.ReasonTargetNotFound},
		{"limits", "nolimits", perfv1.ReasonTargetMissingLimits},
	} {
		e := shortExperiment(d.c.ns, tc.target, envToggle())
		e.Name = tc.name
		if err := k8s.Create(context.Background(), e); err != nil {
			t.Fatal(err)
		}
		ok := false
		for i := 0; i < 100 && !ok; i++ {
			exp := &perfv1.PerfExperiment{}
			_ = k8s.Get(context.Background(), client.ObjectKeyFromObject(e), exp)
			ok = meta.IsStatusConditionTrue(exp.Status.Conditions, perfv1.ConditionStalled) &&
				meta.FindStatusCondition(exp.Status.Conditions, perfv1.ConditionStalled).Reason == tc.reason &&
				exp.Status.Phase == perfv1.PhasePending
			time.Sleep(50 * time.Millisecond)
		}
		if !ok {
			t.Fatalf("%s: not stalled with %s", tc.name, tc.reason)
		}
	}
}

// The seed's death spiral in envtest: the heap runs away once the toggle is on;
// the guardrail aborts within two GC cycles' worth of samples and the toggle is
// reverted, with the numbers in status.
func TestRunawayHeapAbortsAndReverts(t *testing.T) {
	d := newDriver(t)
	d.step = 15 * time.Second
	metricsFor(d.clock).setLeak(true)
	dep := d.c.target("app")
	// The seed's JVM: a 12 GB limit, far above where the leak is caught.
	dep.Spec.Template.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory] = resource.MustParse("12Gi")
	if err := k8s.Update(context.Background(), dep); err != nil {
		t.Fatal(err)
	}
	d.c.tick()
	before := templateJSON(t, d.c.ns, "app")
	e := shortExperiment(d.c.ns, "app", envToggle())
	// Ten minutes of baseline teach the guardrail the pods' healthy sawtooth.
	e.Spec.Windows = perfv1.WindowsSpec{Baseline: "10m", Treatment: "20m", Settle: "0s"}
	e.Spec.Metrics.Interval = "15s"
	if err := k8s.Create(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	exp := d.until("Aborted", terminal)
	if exp.Status.Phase != perfv1.PhaseAborted || exp.Status.Abort == nil || exp.Status.Abort.Reason != perfv1.ReasonHeapGrowth ||
		!strings.Contains(exp.Status.Abort.Message, "MiB/min") {
		t.Fatalf("phase %s abort %+v", exp.Status.Phase, exp.Status.Abort)
	}
	took := exp.Status.Abort.At.Sub(exp.Status.Toggle.AppliedAt.Time)
	t.Logf("aborted %s after the toggle: %s", took, exp.Status.Abort.Message)
	// Two GC cycles after the onset, plus the rollout the env toggle causes
	// and one sampling interval.
	if took > 3*time.Minute {
		t.Fatalf("abort came %s after the toggle", took)
	}
	d.assertRestored(before, "app")
}
