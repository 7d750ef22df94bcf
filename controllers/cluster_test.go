package controllers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
	"perfexp.dev/perf-operator/internal/testenv"
)

// cluster plays, in envtest, the parts of Kubernetes that envtest does not run:
// the Deployment controller (a changed template rolls out at once, unless stuck),
// the Job controller and the kubelet (a k6 Job's pod starts at once and finishes,
// with a k6 result in its termination message, when its window has elapsed on the
// fake clock). It also records every Job UID it ever saw, to catch a Job created
// twice.
type cluster struct {
	t      *testing.T
	ns     string
	clock  *clocktesting.FakeClock
	stuck  bool
	jobUID map[string]types.UID
	dupes  []string
	pokes  int
}

func newCluster(t *testing.T, clock *clocktesting.FakeClock) *cluster {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "pexp-"}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return &cluster{t: t, ns: ns.Name, clock: clock, jobUID: map[string]types.UID{}}
}

// target creates the Deployment under test, with limits and two replicas, and
// marks it rolled out.
func (c *cluster) target(name string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.ns, Annotations: map[string]string{"team": "payments"}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "app", Image: "registry.local/app:1", Args: []string{"--port=8080"},
					Env: []corev1.EnvVar{{Name: "MODE", Value: "prod"}, {Name: "JAVA_TOOL_OPTIONS", Value: "-Xmx512m"}},
					Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
						corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi")}},
				}}},
			},
		},
	}
	if err := k8s.Create(context.Background(), dep); err != nil {
		c.t.Fatal(err)
	}
	c.rollOut(dep)
	return dep
}

// rollOut plays the Deployment controller for one Deployment.
func (c *cluster) rollOut(dep *appsv1.Deployment) {
	if c.stuck || dep.Status.ObservedGeneration >= dep.Generation {
		return
	}
	n := *dep.Spec.Replicas
	dep.Status = appsv1.DeploymentStatus{ObservedGeneration: dep.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n}
	if err := k8s.Status().Update(context.Background(), dep); err != nil {
		c.t.Logf("rollout: %v", err) // a conflict is retried on the next tick
	}
}

// tick plays every controller once.
func (c *cluster) tick() {
	ctx := context.Background()
	var deps appsv1.DeploymentList
	if err := k8s.List(ctx, &deps, client.InNamespace(c.ns)); err != nil {
		c.t.Fatal(err)
	}
	for i := range deps.Items {
		c.rollOut(&deps.Items[i])
	}
	var jobs batchv1.JobList
	if err := k8s.List(ctx, &jobs, client.InNamespace(c.ns)); err != nil {
		c.t.Fatal(err)
	}
	for i := range jobs.Items {
		c.runJob(&jobs.Items[i])
	}
}

// runJob starts a Job's pods and, once its window elapsed, finishes them.
func (c *cluster) runJob(job *batchv1.Job) {
	if uid, ok := c.jobUID[job.Name]; ok && uid != job.UID {
		c.dupes = append(c.dupes, job.Name)
	}
	c.jobUID[job.Name] = job.UID
	if job.DeletionTimestamp != nil || job.Status.CompletionTime != nil {
		return
	}
	ctx := context.Background()
	pod := &corev1.Pod{}
	key := client.ObjectKey{Namespace: c.ns, Name: job.Name + "-0"}
	if err := k8s.Get(ctx, key, pod); err != nil {
		pod = &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: c.ns, Labels: job.Spec.Template.Labels},
			Spec:       job.Spec.Template.Spec,
		}
		pod.Labels[batchv1.JobNameLabel] = job.Name
		if err := k8s.Create(ctx, pod); err != nil {
			c.t.Fatal(err)
		}
		pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
			Name: "k6", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(c.clock.Now())}}}}}
		if err := k8s.Status().Update(ctx, pod); err != nil {
			c.t.Fatal(err)
		}
		return
	}
	started := pod.Status.ContainerStatuses[0].State.Running
	if started == nil {
		return
	}
	qps, dur := windowOf(c.t, job)
	if c.clock.Now().Before(started.StartedAt.Add(dur)) {
		return
	}
	end := metav1.NewTime(started.StartedAt.Add(dur))
	pod.Status.Phase = corev1.PodSucceeded
	pod.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		StartedAt: started.StartedAt, FinishedAt: end, Message: testenv.K6Result(job.Name, qps, dur, started.StartedAt.Time)}}
	if err := k8s.Status().Update(ctx, pod); err != nil {
		c.t.Fatal(err)
	}
	start := started.StartedAt
	job.Status.StartTime = &start
	job.Status.CompletionTime = &end
	job.Status.Succeeded = 1
	job.Status.Conditions = []batchv1.JobCondition{
		{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: end},
		{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: end},
	}
	if err := k8s.Status().Update(ctx, job); err != nil {
		c.t.Fatalf("completing Job %s: %v", job.Name, err)
	}
}

// poke touches the experiment so the operator reconciles it at the fake clock's
// new time (its own requeue timers run on real time).
func (c *cluster) poke(name string) {
	c.pokes++
	patch := fmt.Sprintf(`{"metadata":{"annotations":{"test.perfexp.dev/poke":%q}}}`, strconv.Itoa(c.pokes))
	exp := &perfv1.PerfExperiment{ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: name}}
	if err := k8s.Patch(context.Background(), exp, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		c.t.Logf("poke: %v", err)
	}
}

func (c *cluster) experiment(name string) *perfv1.PerfExperiment {
	exp := &perfv1.PerfExperiment{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: c.ns, Name: name}, exp); err != nil {
		c.t.Fatal(err)
	}
	return exp
}

// templateJSON is the byte-for-byte form of a Deployment's pod template.
func templateJSON(t *testing.T, ns, name string) string {
	dep := &appsv1.Deployment{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, dep); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(dep.Spec.Template)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// windowOf reads a k6 Job's window from the env the operator gave its pods.
func windowOf(t *testing.T, job *batchv1.Job) (int32, time.Duration) {
	qps, dur := testenv.K6Window(job)
	if qps == 0 || dur == 0 {
		t.Fatalf("Job %s has no window env", job.Name)
	}
	return qps, dur
}
