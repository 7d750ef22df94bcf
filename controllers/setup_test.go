package controllers

import (
	"context"
	"fmt"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
)

// The k6 pod the cache keeps has what observeJobs and readLive read (the
// phase, the address, each container's name and state with the summary) and
// nothing else of the status or spec.
func TestTrimPodKeepsWhatIsRead(t *testing.T) {
	term := &corev1.ContainerStateTerminated{ExitCode: 0, Message: `{"metrics":{}}`}
	in := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "k6-0", Labels: map[string]string{perfv1.LabelExperiment: "e"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "k6", Image: "k6"}}},
		Status: corev1.PodStatus{
			Phase: corev1.PodSucceeded, PodIP: "10.0.0.7", HostIP: "192.168.0.1",
			Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "k6", Image: "k6", ImageID: "sha256:x", RestartCount: 1, State: corev1.ContainerState{Terminated: term}}},
		},
	}
	out, err := trimPod(in)
	if err != nil {
		t.Fatal(err)
	}
	p := out.(*corev1.Pod)
	if p.Name != "k6-0" || p.Labels[perfv1.LabelExperiment] != "e" {
		t.Errorf("metadata lost: %+v", p.ObjectMeta)
	}
	if p.Status.Phase != corev1.PodSucceeded || p.Status.PodIP != "10.0.0.7" {
		t.Errorf("phase or address lost: %+v", p.Status)
	}
	if len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].Name != "k6" ||
		p.Status.ContainerStatuses[0].State.Terminated == nil || p.Status.ContainerStatuses[0].State.Terminated.Message != term.Message {
		t.Errorf("container state lost: %+v", p.Status.ContainerStatuses)
	}
	if len(p.Spec.Containers) != 0 || p.Status.HostIP != "" || len(p.Status.Conditions) != 0 || p.Status.ContainerStatuses[0].ImageID != "" {
		t.Errorf("kept more than is read: %+v", p)
	}
}

// Only experiments waiting in preflight are indexed by target.
func TestOnlyWaitingExperimentsAreIndexedByTarget(t *testing.T) {
	for phase, want := range map[perfv1.Phase]bool{
		"": true, perfv1.PhasePending: true, perfv1.PhaseBaseline: false, perfv1.PhaseTreatment: false, perfv1.PhaseSucceeded: false, perfv1.PhaseAborted: false,
	} {
		e := &perfv1.PerfExperiment{Status: perfv1.PerfExperimentStatus{Phase: phase}}
		if got := waitingForTarget(e); got != want {
			t.Errorf("phase %q: waiting %v, want %v", phase, got, want)
		}
	}
}

// observeJobs reads the same Jobs and pods from the informers' experimentIndex
// as the cache's label selection gives: the experiment's own, in its
// namespace, and no other experiment's.
func TestObserveJobsReadsTheExperimentsOwnK6Objects(t *testing.T) {
	exp := &perfv1.PerfExperiment{ObjectMeta: metav1.ObjectMeta{Name: "e", Namespace: "shop", UID: "uid-e"}}
	owner := []metav1.OwnerReference{{APIVersion: perfv1.GroupVersion.String(), Kind: "PerfExperiment", Name: "e", UID: "uid-e", Controller: ptr.To(true)}}
	job := func(ns, name, expName string) *batchv1.Job {
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{perfv1.LabelExperiment: expName}, OwnerReferences: owner},
			Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}}}
	}
	pod := func(ns, name, jobName, expName string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Labels: map[string]string{perfv1.LabelExperiment: expName, batchv1.JobNameLabel: jobName}}}
	}
	objs := []client.Object{
		job("shop", "e-s0-baseline", "e"), pod("shop", "e-s0-baseline-0", "e-s0-baseline", "e"),
		job("shop", "f-s0-baseline", "f"), pod("shop", "f-s0-baseline-0", "f-s0-baseline", "f"),
		job("other", "e-s0-baseline", "e"), pod("other", "e-s0-baseline-0", "e-s0-baseline", "e"),
	}
	read := func(r *PerfExperimentReconciler) (names []string) {
		t.Helper()
		jobs, pods, err := r.observeJobs(context.Background(), exp)
		if err != nil {
			t.Fatal(err)
		}
		for n, j := range jobs {
			names = append(names, "job "+n+fmt.Sprint(" complete=", j.Complete))
		}
		for _, p := range pods {
			names = append(names, "pod "+p.Namespace+"/"+p.Name)
		}
		slices.Sort(names)
		return names
	}

	indexed := &PerfExperimentReconciler{}
	jobs := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{experimentIndex: experimentKey})
	pods := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{experimentIndex: experimentKey})
	for _, o := range objs {
		var err error
		if _, ok := o.(*batchv1.Job); ok {
			err = jobs.Add(o)
		} else {
			err = pods.Add(o)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	indexed.stores = informerStores{jobs: jobs, pods: pods}

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	selected := &PerfExperimentReconciler{Client: fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()}

	want := []string{"job e-s0-baseline complete=true", "pod shop/e-s0-baseline-0"}
	if got := read(indexed); !slices.Equal(got, want) {
		t.Errorf("from the index: %v, want %v", got, want)
	}
	if got := read(selected); !slices.Equal(got, want) {
		t.Errorf("by label: %v, want %v", got, want)
	}
}

// The held target read from the Deployment informer's store is the object the
// cache's Get gives, and a missing one is NotFound both ways (target tells a
// missing Deployment from an unreadable one by that error).
func TestCachedTargetReadsTheInformersStore(t *testing.T) {
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "app",
		Labels: map[string]string{perfv1.LabelExperiment: "e"}}}
	store := toolscache.NewStore(toolscache.MetaNamespaceKeyFunc)
	if err := store.Add(dep); err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	for name, r := range map[string]*PerfExperimentReconciler{
		"store": {stores: informerStores{deployments: store}},
		"Get":   {Client: fake.NewClientBuilder().WithScheme(scheme).WithObjects(dep.DeepCopy()).Build()},
	} {
		got, err := r.cachedTarget(context.Background(), client.ObjectKey{Namespace: "shop", Name: "app"})
		if err != nil || got.Name != "app" || got.Labels[perfv1.LabelExperiment] != "e" {
			t.Errorf("%s: %+v, %v", name, got, err)
		}
		if name == "store" && got != dep {
			t.Errorf("store: a copy, not the cached object")
		}
		if _, err := r.cachedTarget(context.Background(), client.ObjectKey{Namespace: "shop", Name: "gone"}); !apierrors.IsNotFound(err) {
			t.Errorf("%s: a missing Deployment gave %v, want NotFound", name, err)
		}
	}
}
