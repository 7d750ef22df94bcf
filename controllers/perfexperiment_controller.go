// Package controllers holds the PerfExperiment reconciler. It stays thin: it
// observes the cluster (observe.go), asks the engine what to do next, carries the
// actions out (actions.go) and writes the status once (status.go).
package controllers

import (
	"context"
	"errors"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
	"perfexp.dev/perf-operator/internal/engine"
	"perfexp.dev/perf-operator/internal/k6"
	"perfexp.dev/perf-operator/internal/toggle"
)

// The rights below are everything the operator needs for a full run: its own
// objects, the target Deployment (lock, original-state record and toggle), the
// target's pods (readiness, runtime toggles), k6 Jobs and their pods' results,
// script ConfigMaps, pod metrics and events.
//
// +kubebuilder:rbac:groups=perfexp.dev,resources=perfexperiments,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=perfexp.dev,resources=perfexperiments/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=perfexp.dev,resources=perfexperiments/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=metrics.k8s.io,resources=pods,verbs=get;list

// StalledRecheck is how often an experiment stalled in preflight looks again.
// A target it does not hold yet is outside the operator's label-filtered caches,
// so no event would wake it.
const StalledRecheck = time.Minute

// PerfExperimentReconciler reconciles PerfExperiment objects.
type PerfExperimentReconciler struct {
	// Client reads from label-filtered caches and writes to the apiserver.
	client.Client
	// APIReader reads uncached: targets not held yet, script ConfigMaps, target pods.
	APIReader client.Reader
	Scheme    *runtime.Scheme
	Recorder  record.EventRecorder
	Clock     clock.PassiveClock
	// HTTP sends runtime toggles to the target's pods.
	HTTP toggle.Sender
	// Exec runs exec toggles in the target's pods; with no Executor (the
	// operator was not given the pods/exec right) exec toggles are refused
	// before anything changes.
	Exec toggle.Execer
	// Metrics resolves each experiment's metrics provider.
	Metrics MetricsSource
	// LoadAPI reads the running k6 pods' live counters; the zero value reaches
	// pod IPs directly.
	LoadAPI k6.LiveClient

	samples buffers
}

// Reconcile observes one experiment, lets the engine decide, acts, and persists
// the new status in one patch.
func (r *PerfExperimentReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	exp := &perfv1.PerfExperiment{}
	if err := r.Get(ctx, req.NamespacedName, exp); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if exp.DeletionTimestamp.IsZero() && controllerutil.AddFinalizer(exp, perfv1.Finalizer) {
		// The finalizer goes on before anything is touched, so deletion always
		// passes through cleanup.
		return ctrl.Result{}, r.Update(ctx, exp)
	}
	exp.Default()
	before := exp.DeepCopy()

	obs, err := r.observe(ctx, exp)
	if err != nil {
		return ctrl.Result{}, err
	}
	r.sample(ctx, exp, &obs)
	d := engine.Decide(exp, obs)
	if err := r.execute(ctx, exp, &d); err != nil {
		var te *toggleError
		if !errors.As(err, &te) {
			return ctrl.Result{}, err // transient: nothing persisted, actions are idempotent
		}
		obs.ToggleError = te.Error()
		if exp.Status.Toggle != nil {
			exp.Status.Toggle.Pods = te.pods // what the abort's revert must reach
		}
		d = engine.Decide(exp, obs)
		if err := r.execute(ctx, exp, &d); err != nil {
			return ctrl.Result{}, err
		}
	}
	if err := r.writeStatus(ctx, before, exp, d); err != nil {
		if apierrors.IsConflict(err) {
			return ctrl.Result{Requeue: true}, nil // decided on a stale copy; decide again
		}
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: requeueAfter(d)}, nil
}

func requeueAfter(d engine.Decision) time.Duration {
	if d.Stall != nil || (d.Waiting != "" && d.RequeueAfter == 0 && d.Status.Phase == perfv1.PhasePending) {
		return StalledRecheck
	}
	return d.RequeueAfter
}

// writeStatus records events and patches the status once, if it changed and
// more than pending samples changed (those are written in batches).
func (r *PerfExperimentReconciler) writeStatus(ctx context.Context, before, exp *perfv1.PerfExperiment, d engine.Decision) error {
	key := client.ObjectKeyFromObject(exp)
	if removedFinalizer(d) {
		r.samples.drop(key)
		setPhase(key, "")
		return nil // the object is going away; there is no status to write
	}
	p := r.samples.get(key)
	exp.Status = d.Status
	if p.provider != nil {
		exp.Status.MetricsSource = perfv1.MetricsSource(p.provider.Name())
	}
	setConditions(&exp.Status, exp.Spec.SuccessCriteria, exp.Generation, d, r.Clock.Now())
	exp.Status.ObservedGeneration = exp.Generation
	if !flushDue(&before.Status, &exp.Status, p) {
		return nil
	}
	for _, e := range d.Events {
		typ := "Normal"
		if e.Warning {
			typ = "Warning"
		}
		r.Recorder.Event(exp, typ, e.Reason, e.Message)
	}
	// The optimistic lock refuses a status computed from a stale cached copy
	// (the cache can lag behind this reconciler's own last write): merge
	// patches replace lists wholesale, so a stale base would drop the windows'
	// latest samples. The retry decides again on fresh data; actions are
	// idempotent.
	patch := client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})
	if err := r.Status().Patch(ctx, exp, patch); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	recordWrite(key, &before.Status, &exp.Status, judged(&before.Status, &exp.Status, p))
	p.flushed()
	if exp.Status.Phase.IsTerminal() {
		r.samples.drop(key)
	}
	log.FromContext(ctx).V(1).Info("reconciled", "phase", exp.Status.Phase, "actions", len(d.Actions), "requeueAfter", d.RequeueAfter)
	return nil
}

func removedFinalizer(d engine.Decision) bool {
	for _, a := range d.Actions {
		if a.Kind == engine.ActionRemoveFinalizer {
			return true
		}
	}
	return false
}
