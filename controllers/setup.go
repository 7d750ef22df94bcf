package controllers

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
)

// CacheOptions restricts the operator's informers to objects carrying the
// experiment label: its k6 Jobs and their pods, and the targets it holds. With a
// thousand experiments the caches hold their objects, not the cluster's.
func CacheOptions() cache.Options {
	req, err := labels.NewRequirement(perfv1.LabelExperiment, selection.Exists, nil)
	if err != nil {
		panic(err) // a constant key; cannot fail
	}
	owned := cache.ByObject{Label: labels.NewSelector().Add(*req)}
	return cache.Options{
		ByObject: map[client.Object]cache.ByObject{
			&batchv1.Job{}:       owned,
			&corev1.Pod{}:        owned,
			&appsv1.Deployment{}: owned,
		}}
}

// experimentIndex indexes the cached Jobs and pods by their experiment label,
// so a reconcile lists its own objects instead of filtering every k6 object of
// the namespace by label (at N=1000 that scan was a sixth of the CPU).
const experimentIndex = "metadata.labels." + perfv1.LabelExperiment

func experimentOf(o client.Object) []string {
	if v := o.GetLabels()[perfv1.LabelExperiment]; v != "" {
		return []string{v}
	}
	return nil
}

// targetIndex indexes experiments by their target Deployment's name, so a
// Deployment's event wakes exactly the experiments waiting for it.
const targetIndex = "spec.target.deployment"

// SetupWithManager registers the reconciler: experiments, the Jobs they own, the
// Jobs' pods (their start and results) and the targets they hold wake it; and a
// metadata-only watch of Deployments wakes an experiment waiting in preflight
// when its target appears, is released by another experiment, or finishes a
// rollout, so a waiting experiment costs no request until its inputs change.
func (r *PerfExperimentReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &perfv1.PerfExperiment{}, targetIndex, func(o client.Object) []string {
		return []string{o.(*perfv1.PerfExperiment).Spec.Target.Deployment}
	}); err != nil {
		return err
	}
	for _, o := range []client.Object{&batchv1.Job{}, &corev1.Pod{}} {
		if err := mgr.GetFieldIndexer().IndexField(context.Background(), o, experimentIndex, experimentOf); err != nil {
			return err
		}
	}
	byLabel := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		name := o.GetLabels()[perfv1.LabelExperiment]
		if name == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
	})
	waiting := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		var list perfv1.PerfExperimentList
		if err := r.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.MatchingFields{targetIndex: o.GetName()}); err != nil {
			return nil
		}
		var out []reconcile.Request
		for i := range list.Items {
			if e := &list.Items[i]; e.Status.Phase == "" || e.Status.Phase == perfv1.PhasePending {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(e)})
			}
		}
		return out
	})
	workers := r.Workers
	if workers < 1 {
		workers = 1
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&perfv1.PerfExperiment{}, builder.WithPredicates(notStatusOnly)).
		Owns(&batchv1.Job{}).
		Watches(&corev1.Pod{}, byLabel).
		Watches(&appsv1.Deployment{}, byLabel).
		Watches(&appsv1.Deployment{}, waiting, builder.OnlyMetadata).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Named("perfexperiment").
		Complete(r)
}

// notStatusOnly drops the update events of an experiment whose status alone
// changed. The operator is the status's only writer, and every status write
// comes with its own requeue (summarize), so the echo of each write was a
// reconcile that found nothing to do: about a third of all reconciles in the
// scale benchmark (test/bench/scale). Spec (generation), labels, annotations,
// finalizers and deletion still wake the experiment.
var notStatusOnly = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	o, n := e.ObjectOld, e.ObjectNew
	if o == nil || n == nil {
		return true
	}
	return o.GetGeneration() != n.GetGeneration() ||
		!equality.Semantic.DeepEqual(o.GetLabels(), n.GetLabels()) ||
		!equality.Semantic.DeepEqual(o.GetAnnotations(), n.GetAnnotations()) ||
		!equality.Semantic.DeepEqual(o.GetFinalizers(), n.GetFinalizers()) ||
		!equality.Semantic.DeepEqual(o.GetOwnerReferences(), n.GetOwnerReferences()) ||
		!o.GetDeletionTimestamp().Equal(n.GetDeletionTimestamp())
}}
