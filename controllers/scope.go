package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
	"perfexp.dev/perf-operator/internal/engine"
	"perfexp.dev/perf-operator/internal/toggle"
)

// scope is one reconcile's view of the cluster: the experiment as read, the
// target Deployment, its selector, the resolved container and the time, read
// once and handed to every step (observation, sampling, actions), so no step
// reads the same object again. The target's pods are listed at most once, and
// only by the steps that need them.
type scope struct {
	// exp is the experiment the engine decides on; before is its persisted
	// state, the base of the status patch.
	exp, before *perfv1.PerfExperiment
	now         time.Time
	// target is nil when the Deployment does not exist. Actions that write it
	// replace it with the API server's answer.
	target   *appsv1.Deployment
	selector labels.Selector
	// container is the name of the toggled and measured container: the spec's,
	// or the template's first.
	container string
	obs       engine.Observed
	// k6Pods are the experiment's k6 pods as cached, read once (observeJobs)
	// for the Jobs' views and the live load checks: shared with the cache,
	// read only.
	k6Pods []*corev1.Pod

	pods     []corev1.Pod
	podsRead bool
}

// self is the lock annotation's value for this experiment.
func (s *scope) self() string { return s.exp.Namespace + "/" + s.exp.Name }

// holdsLock reports whether the target carries this experiment's lock now.
func (s *scope) holdsLock() bool {
	return s.target != nil && s.target.Annotations[perfv1.AnnotationLock] == s.self()
}

// setTarget records a read or written target with its selector and container.
func (s *scope) setTarget(dep *appsv1.Deployment) error {
	s.target = dep
	if dep == nil {
		return nil
	}
	if dep.Spec.Selector == nil {
		return fmt.Errorf("Deployment %s has no selector", dep.Name)
	}
	sel, err := metav1.LabelSelectorAsSelector(dep.Spec.Selector)
	if err != nil {
		return fmt.Errorf("Deployment %s: %w", dep.Name, err)
	}
	s.selector = sel
	s.container = s.exp.Spec.Target.Container
	if s.container == "" && len(dep.Spec.Template.Spec.Containers) > 0 {
		s.container = dep.Spec.Template.Spec.Containers[0].Name
	}
	return nil
}

// livePods lists the target's pods that are not being deleted, once per
// reconcile, uncached: the target's pods are outside the operator's
// label-filtered caches. No pods and no error when the target is gone.
func (s *scope) livePods(ctx context.Context, reader client.Reader) ([]corev1.Pod, error) {
	if s.podsRead || s.target == nil {
		return s.pods, nil
	}
	var list corev1.PodList
	if err := reader.List(ctx, &list, client.InNamespace(s.exp.Namespace), client.MatchingLabelsSelector{Selector: s.selector}); err != nil {
		return nil, err
	}
	s.pods = list.Items[:0]
	for _, pod := range list.Items {
		if pod.DeletionTimestamp.IsZero() {
			s.pods = append(s.pods, pod)
		}
	}
	s.podsRead = true
	return s.pods, nil
}

// podsNamed returns the live pods among names that have an address, whatever
// their readiness: a pod that took a runtime toggle and went NotReady may
// still have it. Pods that are gone lost the toggle with their process.
func (s *scope) podsNamed(ctx context.Context, reader client.Reader, names []string) ([]toggle.Pod, error) {
	live, err := s.livePods(ctx, reader)
	if err != nil {
		return nil, err
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	var out []toggle.Pod
	for _, p := range live {
		if want[p.Name] && p.Status.PodIP != "" {
			out = append(out, toggle.Pod{Name: p.Name, IP: p.Status.PodIP})
		}
	}
	return out, nil
}

// readyPods lists the target's ready pods with an address: those a runtime
// toggle is sent to.
func (s *scope) readyPods(ctx context.Context, reader client.Reader) ([]toggle.Pod, error) {
	live, err := s.livePods(ctx, reader)
	if err != nil {
		return nil, err
	}
	var pods []toggle.Pod
	for _, p := range live {
		if p.Status.PodIP != "" && podReady(&p) {
			pods = append(pods, toggle.Pod{Name: p.Name, IP: p.Status.PodIP})
		}
	}
	return pods, nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// templateHash is the digest of a pod template that the holding experiment
// writes beside it (AnnotationTemplateHash) in the same update: a template
// that no longer matches was changed by someone else.
func templateHash(t *corev1.PodTemplateSpec) string {
	b, err := json.Marshal(t)
	if err != nil {
		return "" // a template read from the API server always marshals
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:12])
}
