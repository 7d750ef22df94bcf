// Package controllers holds the PerfExperiment reconciler. It stays thin: it
// observes the cluster, asks the experiment engine what to do next and does it.
package controllers

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
)

// The rights below are everything the operator needs for a full run: its own
// objects, the target Deployment (lock annotation and toggle), the target's pods
// (readiness, restarts, runtime toggles), k6 Jobs and their pods' results, script
// ConfigMaps, pod metrics and events.
//
// +kubebuilder:rbac:groups=perfexp.dev,resources=perfexperiments,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=perfexp.dev,resources=perfexperiments/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=perfexp.dev,resources=perfexperiments/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=apps,resources=replicasets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=metrics.k8s.io,resources=pods,verbs=get;list

// PerfExperimentReconciler reconciles PerfExperiment objects.
type PerfExperimentReconciler struct {
	client.Client
}

// Reconcile is called for every change of a PerfExperiment or an object it owns.
// The experiment engine (issue "Experiment engine") fills it in; for now it only
// confirms the object exists, so the manager can be started and probed end to end.
func (r *PerfExperimentReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var exp perfv1.PerfExperiment
	if err := r.Get(ctx, req.NamespacedName, &exp); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	log.FromContext(ctx).V(1).Info("observed experiment", "phase", exp.Status.Phase)
	return ctrl.Result{}, nil
}

// SetupWithManager registers the reconciler with the manager.
func (r *PerfExperimentReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&perfv1.PerfExperiment{}).
		Named("perfexperiment").
		Complete(r)
}
