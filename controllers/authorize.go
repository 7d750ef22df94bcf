package controllers

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
)

// The operator acts for the people who create experiments, with rights of its
// own that they may lack. Before an experiment changes anything, and again
// before each toggle, every effect it will have is checked with a
// SubjectAccessReview for the user stamped on it by the chart's
// MutatingAdmissionPolicy (config/admission): an effect the user may not do
// through the API themselves stalls the experiment with Forbidden, naming the
// right, and nothing is changed.
//
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=localsubjectaccessreviews,verbs=create

// Right is one thing an experiment does in its namespace.
type Right struct {
	Verb, Group, Resource, Subresource, Name string
}

func (r Right) String() string {
	res := r.Resource
	if r.Group != "" {
		res += "." + r.Group
	}
	if r.Subresource != "" {
		res += "/" + r.Subresource
	}
	if r.Name != "" {
		return fmt.Sprintf("%s %s %q", r.Verb, res, r.Name)
	}
	return r.Verb + " " + res
}

// canI is the kubectl line that asks the same question.
func (r Right) canI(ns, user string) string {
	res := r.Resource
	if r.Group != "" {
		res += "." + r.Group
	}
	if r.Name != "" {
		res += "/" + r.Name
	}
	sub := ""
	if r.Subresource != "" {
		sub = " --subresource=" + r.Subresource
	}
	return fmt.Sprintf("kubectl auth can-i %s %s%s -n %s --as %s", r.Verb, res, sub, ns, user)
}

// rightsFor lists what an experiment does, each of which its requester must be
// allowed to do themselves.
func rightsFor(exp *perfv1.PerfExperiment) []Right {
	rights := []Right{{Verb: "create", Group: "batch", Resource: "jobs"}}
	t := exp.Spec.Switch() // every variant is of the same kind
	if t == nil {          // a load-only sweep changes nothing on the target
		return append(rights, scriptRights(exp)...)
	}
	switch {
	case t.RollsPods():
		rights = append(rights, Right{Verb: "patch", Group: "apps", Resource: "deployments", Name: exp.Spec.Target.Deployment})
	case t.HTTP != nil:
		// Sending a request to a pod through the API server is what pods/proxy grants.
		rights = append(rights, Right{Verb: "create", Resource: "pods", Subresource: "proxy"})
	case t.Exec != nil:
		rights = append(rights, Right{Verb: "create", Resource: "pods", Subresource: "exec"})
	}
	for _, arm := range exp.Spec.Arms() {
		if !arm.Toggle.RollsPods() && arm.Toggle.OnRevertFailure != perfv1.RevertFailureKeep {
			rights = append(rights, Right{Verb: "delete", Resource: "pods"})
			break
		}
	}
	return append(rights, scriptRights(exp)...)
}

func scriptRights(exp *perfv1.PerfExperiment) []Right {
	if ref := exp.Spec.Load.ScriptRef; ref != nil {
		return []Right{{Verb: "get", Resource: "configmaps", Name: ref.Name}}
	}
	return nil
}

// Reviewer answers with LocalSubjectAccessReviews whether a user may do
// something in a namespace, remembering answers for TTL: a revoked right
// takes effect within that time.
type Reviewer struct {
	Client client.Client
	Clock  clock.PassiveClock
	TTL    time.Duration

	mu    sync.Mutex
	cache map[string]reviewAnswer
}

type reviewAnswer struct {
	allowed bool
	at      time.Time
}

// forbidden returns why the experiment's requester may not run it, or "".
// An experiment without a stamp cannot be checked, and is refused.
func (v *Reviewer) forbidden(ctx context.Context, exp *perfv1.PerfExperiment, rights []Right) (string, error) {
	user := exp.Annotations[perfv1.AnnotationRequestedBy]
	if user == "" {
		return fmt.Sprintf("the experiment has no %s annotation, so the operator cannot check that its creator may do what it does: install the chart's requester policy (a MutatingAdmissionPolicy) and create the experiment again", perfv1.AnnotationRequestedBy), nil
	}
	var groups []string
	if g := exp.Annotations[perfv1.AnnotationRequestedByGroups]; g != "" {
		groups = strings.Split(g, ",")
	}
	uid := exp.Annotations[perfv1.AnnotationRequestedByUID]
	for _, r := range rights {
		ok, err := v.allowed(ctx, user, uid, groups, exp.Namespace, r)
		if err != nil {
			return "", err
		}
		if !ok {
			return fmt.Sprintf("%s, who asked for this experiment, may not %s in namespace %s, which the experiment would do for them (check: %s)",
				user, r, exp.Namespace, r.canI(exp.Namespace, user)), nil
		}
	}
	return "", nil
}

func (v *Reviewer) allowed(ctx context.Context, user, uid string, groups []string, ns string, r Right) (bool, error) {
	key := strings.Join([]string{user, uid, strings.Join(groups, ","), ns, r.Verb, r.Group, r.Resource, r.Subresource, r.Name}, "\x00")
	now := v.Clock.Now()
	v.mu.Lock()
	a, ok := v.cache[key]
	v.mu.Unlock()
	if ok && now.Sub(a.at) < v.TTL {
		return a.allowed, nil
	}
	sar := &authzv1.LocalSubjectAccessReview{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns},
		Spec: authzv1.SubjectAccessReviewSpec{
			User: user, UID: uid, Groups: groups,
			ResourceAttributes: &authzv1.ResourceAttributes{Namespace: ns, Verb: r.Verb, Group: r.Group, Resource: r.Resource, Subresource: r.Subresource, Name: r.Name},
		},
	}
	if err := v.Client.Create(ctx, sar); err != nil {
		return false, fmt.Errorf("asking the API server whether %s may %s: %w", user, r, err)
	}
	v.mu.Lock()
	if v.cache == nil {
		v.cache = map[string]reviewAnswer{}
	}
	v.cache[key] = reviewAnswer{allowed: sar.Status.Allowed, at: now}
	v.mu.Unlock()
	return sar.Status.Allowed, nil
}
