// Package controllers holds the PerfExperiment reconciler. It stays thin: it
// observes the cluster (observe.go), asks the engine what to do next, carries the
// actions out (actions.go) and writes the status once (status.go).
package controllers

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
	"perfexp.dev/perf-operator/internal/engine"
	"perfexp.dev/perf-operator/internal/k6"
	"perfexp.dev/perf-operator/internal/toggle"
)

// The rights below are everything the operator needs for a full run: its own
// objects, the target Deployment (lock, original-state record and toggle), the
// target's pods (readiness, runtime toggles; deleting those a revert cannot reach), k6 Jobs and their pods' results,
// script ConfigMaps, pod metrics and events.
//
// +kubebuilder:rbac:groups=perfexp.dev,resources=perfexperiments,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=perfexp.dev,resources=perfexperiments/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=perfexp.dev,resources=perfexperiments/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;create
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=metrics.k8s.io,resources=pods,verbs=get;list

// StalledRecheck is how often an experiment waiting for its script ConfigMap,
// or for its requester to be granted a right, looks again: neither a ConfigMap
// it did not create nor an RBAC change is in the operator's caches, so no
// event would wake it. Every other wait in preflight is woken by its target
// Deployment's events.
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
	// ShareMetrics lets experiments of one namespace with the same
	// spec.metrics share their metrics queries (see sharedMetrics).
	ShareMetrics bool
	// Workers is how many experiments are reconciled at once (one at a time
	// each); at least 1.
	Workers int
	// Reviewer checks that each experiment's requester may do its effects
	// themselves; nil checks nothing (tests of other concerns).
	Reviewer *Reviewer
	// Allow is what experiments may name: Prometheus servers and k6 images.
	Allow AllowList
	// LoadAPI reads the running k6 pods' live counters; the zero value reaches
	// pod IPs directly.
	LoadAPI k6.LiveClient
	// StatusMetadata, when set, sends the status patches (patchStatusFrom):
	// client-go's metadata client, addressed by resource, needs no REST
	// mapping per write as controller-runtime's does (5 % of the operator's
	// allocations at N=1000, docs/scale.md). nil sends them through Client.
	StatusMetadata metadata.Interface

	samples       buffers
	sharedMetrics sharedMetrics
	stores        informerStores
}

// Reconcile observes one experiment, lets the engine decide, acts, and records
// the outcome, whatever it was, in one status patch (summarize).
func (r *PerfExperimentReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	// before is the experiment as persisted, the base of the status patch: the
	// cache's own (CacheOptions), only read. exp is the copy the reconcile
	// decides on and changes.
	before := &perfv1.PerfExperiment{}
	if err := r.Get(ctx, req.NamespacedName, before); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if before.DeletionTimestamp.IsZero() && !controllerutil.ContainsFinalizer(before, perfv1.Finalizer) {
		// The finalizer goes on before anything is touched, so deletion always
		// passes through cleanup; the run then starts in the same reconcile,
		// from the API server's answer (this reconcile's own object).
		withFinalizer := before.DeepCopy()
		controllerutil.AddFinalizer(withFinalizer, perfv1.Finalizer)
		if err := r.Update(ctx, withFinalizer); err != nil {
			return ctrl.Result{}, err
		}
		before = withFinalizer
	}
	exp := decisionCopy(before)
	exp.Default() // the spec's defaults; before's spec is never read

	s, err := r.observe(ctx, exp, before)
	if err != nil {
		return r.summarize(ctx, s, nil, outcome{err: fmt.Errorf("observing: %w", err)})
	}
	r.sample(ctx, s)
	d := engine.Decide(exp, s.obs)
	out := r.execute(ctx, s, &d)
	r.notePods(ctx, s)
	return r.summarize(ctx, s, &d, out)
}

// decisionCopy copies what a reconcile changes of the cached experiment: its
// metadata (the finalizer, the resourceVersion of its own writes) and its spec
// (defaulted in place). The status is shared with the cache and only read: the
// engine decides into a copy of its own (engine.Decide) and the status the
// reconcile writes replaces exp's whole (summarize, writeStatus). Copying it
// too was 3 % of the allocations at N=1000 (docs/scale.md).
// The envtest driver checks the cache still holds what the API server sent at
// every step of every lifecycle test (assertCacheAsSent).
func decisionCopy(cached *perfv1.PerfExperiment) *perfv1.PerfExperiment {
	exp := &perfv1.PerfExperiment{TypeMeta: cached.TypeMeta, Status: cached.Status}
	cached.ObjectMeta.DeepCopyInto(&exp.ObjectMeta)
	cached.Spec.DeepCopyInto(&exp.Spec)
	return exp
}

func requeueAfter(d engine.Decision) time.Duration {
	if d.Stall != nil && (d.Stall.Reason == perfv1.ReasonScriptNotFound || d.Stall.Reason == perfv1.ReasonForbidden) {
		return StalledRecheck
	}
	return d.RequeueAfter
}

func removedFinalizer(d engine.Decision) bool {
	for _, a := range d.Actions {
		if a.Kind == engine.ActionRemoveFinalizer {
			return true
		}
	}
	return false
}
