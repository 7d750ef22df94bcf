package controllers

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
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
	return cache.Options{ByObject: map[client.Object]cache.ByObject{
		&batchv1.Job{}:       owned,
		&corev1.Pod{}:        owned,
		&appsv1.Deployment{}: owned,
		&corev1.ConfigMap{}:  owned,
	}}
}

// SetupWithManager registers the reconciler: experiments, the Jobs they own, the
// Jobs' pods (their start and results) and the targets they hold wake it.
func (r *PerfExperimentReconciler) SetupWithManager(mgr ctrl.Manager) error {
	byLabel := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		name := o.GetLabels()[perfv1.LabelExperiment]
		if name == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		For(&perfv1.PerfExperiment{}).
		Owns(&batchv1.Job{}).
		Watches(&corev1.Pod{}, byLabel).
		Watches(&appsv1.Deployment{}, byLabel).
		Named("perfexperiment").
		Complete(r)
}
