package controllers

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
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

// CacheOptions restricts the operator's informers to what it reads. Jobs and
// pods are those carrying the experiment label (its k6 Jobs and their pods),
// so with a thousand experiments the caches hold their objects, not the
// cluster's. Deployments are watched in full, one informer for two uses: the
// targets this operator holds (labelled) are cached as served, since the
// reconciler reads and updates them from the cache; every other Deployment is
// cached as its name and labels only, which is all the wake-up of a waiting
// experiment needs (the reconciler reads a target it does not hold from the
// API server). Nothing reads managedFields, nor the pod specs of k6 Jobs and
// pods: the transforms drop them.
//
// Deployments are read without deep copies: every reconcile reads its held
// target, and copying its template was 5 % of the operator's allocations at
// N=1000 (docs/scale.md). A Get fills a struct of the caller's whose maps and
// slices are the cache's own: the reconciler only reads them, and copies the
// target before changing it (updateTarget).
//
// No transform touches what the reconciler writes back or hashes: a held
// Deployment keeps its annotations and template (it is updated from the cached
// copy, and its pod template is compared with the digest written beside it),
// and experiments keep everything but managedFields (the finalizer update
// starts from the cached copy; an omitted managedFields leaves the server's).
func CacheOptions() cache.Options {
	req, err := labels.NewRequirement(perfv1.LabelExperiment, selection.Exists, nil)
	if err != nil {
		panic(err) // a constant key; cannot fail
	}
	owned := labels.NewSelector().Add(*req)
	return cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&batchv1.Job{}:       {Label: owned, Transform: trimJob},
			&corev1.Pod{}:        {Label: owned, Transform: trimPod},
			&appsv1.Deployment{}: {Transform: trimDeployment, UnsafeDisableDeepCopy: ptr.To(true)},
			// Each reconcile copies its experiment once, from the cached one it
			// keeps as the status patch's base (Reconcile).
			&perfv1.PerfExperiment{}: {UnsafeDisableDeepCopy: ptr.To(true)},
		}}
}

// trimJob keeps of a k6 Job what observeJobs reads: metadata (labels, owner),
// spec.completions and the status. The pod template (the script's command,
// env and affinity) is dropped.
func trimJob(in any) (any, error) {
	j, ok := in.(*batchv1.Job)
	if !ok {
		return in, nil
	}
	j.ManagedFields = nil
	j.Spec.Template = corev1.PodTemplateSpec{}
	j.Spec.Selector = nil
	return j, nil
}

// trimPod keeps of a k6 pod what observeJobs and readLive read: metadata, the
// phase, the address and each container's name and state (the k6 summary is
// the terminated state's message). The spec, conditions, other addresses and
// init containers are dropped.
func trimPod(in any) (any, error) {
	p, ok := in.(*corev1.Pod)
	if !ok {
		return in, nil
	}
	p.ManagedFields = nil
	p.Spec = corev1.PodSpec{}
	statuses := make([]corev1.ContainerStatus, len(p.Status.ContainerStatuses))
	for i, cs := range p.Status.ContainerStatuses {
		statuses[i] = corev1.ContainerStatus{Name: cs.Name, State: cs.State}
	}
	p.Status = corev1.PodStatus{Phase: p.Status.Phase, PodIP: p.Status.PodIP, ContainerStatuses: statuses}
	return p, nil
}

// trimDeployment keeps a Deployment this operator holds (it carries the
// experiment label) whole but for managedFields, and any other as its
// identity and labels: enough to wake the experiments waiting for it, and to
// tell from the label that it is not held (the reconciler then reads it from
// the API server).
func trimDeployment(in any) (any, error) {
	d, ok := in.(*appsv1.Deployment)
	if !ok {
		return in, nil
	}
	d.ManagedFields = nil
	if _, held := d.Labels[perfv1.LabelExperiment]; held {
		return d, nil
	}
	return &appsv1.Deployment{TypeMeta: d.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Name: d.Name, Namespace: d.Namespace, UID: d.UID, ResourceVersion: d.ResourceVersion,
		Generation: d.Generation, Labels: d.Labels, DeletionTimestamp: d.DeletionTimestamp,
	}}, nil
}

// experimentIndex indexes the cached Jobs and pods by namespace and
// experiment label, so a reconcile reads its own objects instead of filtering
// every k6 object of the namespace by label (at N=1000 that scan was a sixth of
// the CPU). observeJobs reads the index itself (informerStores): a cache List, even
// without deep copies, copied each object into a new slice and built a new
// object to learn the list's kind, 13 % of the operator's allocations at
// N=1000 (docs/scale.md).
const experimentIndex = "perfexp.dev/experiment"

func experimentKey(obj any) ([]string, error) {
	o, ok := obj.(client.Object)
	if !ok {
		return nil, nil
	}
	if v := o.GetLabels()[perfv1.LabelExperiment]; v != "" {
		return []string{experimentIndexKey(o.GetNamespace(), v)}, nil
	}
	return nil, nil
}

// experimentIndexKey is experimentIndex's key of an experiment's objects.
func experimentIndexKey(namespace, experiment string) string {
	return namespace + "/" + experiment
}

// informerStores are the cache's own stores, read without its copies: the k6
// Jobs and pods indexed by experiment, and the held Deployments by key.
type informerStores struct {
	jobs, pods  toolscache.Indexer
	deployments toolscache.Store
}

// useInformerStores adds experimentIndex to the Job and pod informers and
// keeps their indexes and the Deployment informer's store. The informers are
// client-go's; if they were not (a cache over several namespaces), reads fall
// back to the cache's Get and label selection (observeJobs, target).
func (r *PerfExperimentReconciler) useInformerStores(ctx context.Context, c cache.Cache) error {
	informer := func(o client.Object) (toolscache.SharedIndexInformer, error) {
		inf, err := c.GetInformer(ctx, o)
		if err != nil {
			return nil, err
		}
		sii, _ := inf.(toolscache.SharedIndexInformer)
		return sii, nil
	}
	var infs [3]toolscache.SharedIndexInformer
	for i, o := range []client.Object{&batchv1.Job{}, &corev1.Pod{}, &appsv1.Deployment{}} {
		inf, err := informer(o)
		if err != nil {
			return err
		}
		if inf == nil {
			ctrl.Log.WithName("setup").Info("the cache's informers are not client-go's: k6 Jobs and pods are read by label selection, targets by Get")
			return nil
		}
		infs[i] = inf
	}
	for _, inf := range infs[:2] {
		if err := inf.AddIndexers(toolscache.Indexers{experimentIndex: experimentKey}); err != nil {
			return err
		}
	}
	r.stores = informerStores{jobs: infs[0].GetIndexer(), pods: infs[1].GetIndexer(), deployments: infs[2].GetStore()}
	return nil
}

// targetIndex indexes the experiments waiting in preflight by their target
// Deployment's name, so a Deployment's event wakes exactly the experiments
// waiting for it. Only waiting ones: a started experiment is woken by its
// held target's label, and each index entry is two small sets in the cache
// (by namespace and across namespaces), about 1 MB at 1,000 running
// experiments (test/bench/scale).
const targetIndex = "spec.target.deployment"

func waitingForTarget(e *perfv1.PerfExperiment) bool {
	return e.Status.Phase == "" || e.Status.Phase == perfv1.PhasePending
}

// SetupWithManager registers the reconciler: experiments, the Jobs they own, the
// Jobs' pods (their start and results) and the targets they hold wake it; and
// any Deployment's event wakes the experiments waiting in preflight for it
// (it appears, is released by another experiment, or finishes a rollout), so
// a waiting experiment costs no request until its inputs change.
func (r *PerfExperimentReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &perfv1.PerfExperiment{}, targetIndex, func(o client.Object) []string {
		if e := o.(*perfv1.PerfExperiment); waitingForTarget(e) {
			return []string{e.Spec.Target.Deployment}
		}
		return nil
	}); err != nil {
		return err
	}
	if err := r.useInformerStores(context.Background(), mgr.GetCache()); err != nil {
		return err
	}
	byLabel := func(o client.Object) []reconcile.Request {
		name := o.GetLabels()[perfv1.LabelExperiment]
		if name == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
	}
	waiting := func(ctx context.Context, o client.Object) []reconcile.Request {
		var list perfv1.PerfExperimentList
		if err := r.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.MatchingFields{targetIndex: o.GetName()}); err != nil {
			return nil
		}
		var out []reconcile.Request
		for i := range list.Items {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
		return out
	}
	// k6 Jobs and pods wake the experiment their label names.
	toExperiment := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request { return byLabel(o) })
	// One handler on the one Deployment informer: its holder, and whoever
	// waits for it (the queue merges a request named twice).
	targets := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		return append(byLabel(o), waiting(ctx, o)...)
	})
	workers := r.Workers
	if workers < 1 {
		workers = 1
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&perfv1.PerfExperiment{}, builder.WithPredicates(notStatusOnly)).
		// Jobs and pods carry their experiment's label: mapping an event by it
		// costs nothing, where Owns looks the owner's kind up in the REST mapper
		// at every Job event (3 % of the allocations at N=1000, docs/scale.md).
		// observeJobs still reads only the Jobs the experiment controls.
		Watches(&batchv1.Job{}, toExperiment, builder.WithPredicates(notCreated)).
		Watches(&corev1.Pod{}, toExperiment, builder.WithPredicates(notDeleted)).
		Watches(&appsv1.Deployment{}, targets).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Named("perfexperiment").
		Complete(r)
}

// notDeleted drops the delete events of k6 pods. A k6 pod goes away after its
// Job, which the operator deleted itself (the garbage collector deletes the
// pods a moment later: a reconcile for each that had nothing to do, 6 % of all
// reconciles at N=1000, test/bench/scale); a pod lost mid-window shows in its
// Job's status, whose event wakes the experiment.
var notDeleted = predicate.Funcs{DeleteFunc: func(event.DeleteEvent) bool { return false }}

// notCreated drops the create events of k6 Jobs. The operator creates them
// itself and waits for their pods, whose events wake it; a Job seen when the
// manager starts is not news either (every experiment is reconciled then). An
// event per Job was two reconciles per run that found nothing to do (7 % at
// N=1000, test/bench/scale). A Job's changes and deletion still wake it.
var notCreated = predicate.Funcs{CreateFunc: func(event.CreateEvent) bool { return false }}

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
