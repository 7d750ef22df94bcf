package controllers

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
