package controllers

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// The kubelet orders container statuses by name, not as in the template:
// restarts and OOM kills are judged on the named container wherever it is.
func TestPodStateIsTheNamedContainers(t *testing.T) {
	pod := &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
		{Name: "a-sidecar", RestartCount: 7, LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "OOMKilled"}}},
		{Name: "app", RestartCount: 1},
	}}}
	s := podState(pod, "app")
	if s.Restarts != 1 || s.OOMKilled {
		t.Fatalf("judged on the wrong container: %+v", s)
	}
	s = podState(pod, "a-sidecar")
	if s.Restarts != 7 || !s.OOMKilled {
		t.Fatalf("sidecar: %+v", s)
	}
}
