package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
	"perfexp.dev/perf-operator/internal/engine"
	"perfexp.dev/perf-operator/internal/k6"
	"perfexp.dev/perf-operator/internal/metrics"
	"perfexp.dev/perf-operator/internal/toggle"
)

// observe reads what the engine needs into the reconcile's scope. Reads of
// objects this experiment owns or holds come from label-filtered caches; the
// rest (a target not held yet, a user script) are single uncached reads made
// only in preflight.
func (r *PerfExperimentReconciler) observe(ctx context.Context, exp *perfv1.PerfExperiment, before *perfv1.PerfExperiment) (*scope, error) {
	s := &scope{exp: exp, before: before, now: r.Clock.Now()}
	s.obs = engine.Observed{Now: s.now, Deleting: !exp.DeletionTimestamp.IsZero()}
	dep, err := r.target(ctx, exp)
	if err != nil {
		return s, err
	}
	if err := s.setTarget(dep); err != nil {
		return s, err
	}
	if dep != nil {
		if s.obs.Target, err = r.observeTarget(ctx, s); err != nil {
			return s, err
		}
	}
	if s.obs.Jobs, s.k6Pods, err = r.observeJobs(ctx, exp); err != nil {
		return s, err
	}
	pending := exp.Status.Phase == "" || exp.Status.Phase == perfv1.PhasePending
	if pending && !s.obs.Deleting && exp.Spec.Load.ScriptRef != nil {
		if s.obs.ScriptMissing, err = r.scriptMissing(ctx, exp); err != nil {
			return s, err
		}
	}
	if pending && !s.obs.Deleting {
		s.obs.NotAllowed = r.Allow.refuses(exp)
		if q := exp.Spec.Metrics.Queries; q != nil {
			if err := metrics.QueriesFromSpec(q).Validate(); err != nil {
				s.obs.InvalidSpec = "spec.metrics.queries: " + err.Error()
			}
		}
	}
	if pending && !s.obs.Deleting && r.Reviewer != nil && dep != nil {
		if s.obs.Forbidden, err = r.Reviewer.forbidden(ctx, exp, rightsFor(exp)); err != nil {
			return s, err
		}
	}
	return s, nil
}

// target reads the target Deployment: from the cache when this experiment holds
// it (it then carries the experiment's label), otherwise uncached, unless the
// experiment has let it go (letGo). nil when absent or let go. A cached target
// shares its maps and slices with the cache (CacheOptions): read it, or copy
// it before a change.
func (r *PerfExperimentReconciler) target(ctx context.Context, exp *perfv1.PerfExperiment) (*appsv1.Deployment, error) {
	key := client.ObjectKey{Namespace: exp.Namespace, Name: exp.Spec.Target.Deployment}
	cached, err := r.cachedTarget(ctx, key)
	if err == nil && cached.Labels[perfv1.LabelExperiment] == exp.Name {
		return cached, nil
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, err
	}
	if letGo(exp) {
		return nil, nil
	}
	// A fresh object: decoding into the cached one would write into the
	// cache's maps.
	dep := &appsv1.Deployment{}
	if err := r.APIReader.Get(ctx, key, dep); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return dep, nil
}

// cachedTarget is the cache's Deployment at key, shared with the cache (read
// only): from the informer's store when there is one (the cache's Get makes a
// shallow copy, a Deployment struct per reconcile: 4 % of the allocations at
// N=1000, docs/scale.md). A NotFound error when it is not cached.
func (r *PerfExperimentReconciler) cachedTarget(ctx context.Context, key client.ObjectKey) (*appsv1.Deployment, error) {
	if r.stores.deployments == nil {
		dep := &appsv1.Deployment{}
		return dep, r.Get(ctx, key, dep)
	}
	o, ok, err := r.stores.deployments.GetByKey(key.String())
	if err != nil {
		return nil, err
	}
	dep, _ := o.(*appsv1.Deployment)
	if !ok || dep == nil {
		return nil, apierrors.NewNotFound(appsv1.Resource("deployments"), key.Name)
	}
	return dep, nil
}

// letGo reports whether the experiment has ended with everything on its target
// switched back and released, and is not being deleted: its persisted ending
// was written only after the revert and the lock's release went through (an
// ending whose revert failed keeps the toggle marked on, and reads the target
// until the revert does go through). Such an experiment needs nothing of a
// target it no longer holds, so it reads none: its Jobs' deletions woke it,
// each with an uncached read of the released target (two per run at N=1000,
// docs/scale.md). A target that still carries its label is read from the
// cache as before.
func letGo(exp *perfv1.PerfExperiment) bool {
	if !exp.DeletionTimestamp.IsZero() || !exp.Status.Phase.IsTerminal() {
		return false
	}
	t := exp.Status.Toggle
	return t == nil || (!t.Applied && len(t.Pods) == 0)
}

func (r *PerfExperimentReconciler) observeTarget(ctx context.Context, s *scope) (*engine.Target, error) {
	exp, dep := s.exp, s.target
	t := &engine.Target{HeldBy: dep.Annotations[perfv1.AnnotationLock], Rollout: rolloutOf(dep), Replicas: 1}
	if dep.Spec.Replicas != nil {
		t.Replicas = *dep.Spec.Replicas
	}
	if i, err := toggle.ContainerIndex(&dep.Spec.Template, exp.Spec.Target.Container); err == nil {
		limits := dep.Spec.Template.Spec.Containers[i].Resources.Limits
		t.CPULimitCores = limits.Cpu().AsApproximateFloat64()
		t.MemoryLimitBytes = limits.Memory().AsApproximateFloat64()
		t.MissingLimits = missingLimits(limits)
	}
	self := s.self()
	if t.HeldBy != "" && t.HeldBy != self {
		gone, err := r.holderGone(ctx, t.HeldBy)
		if err != nil {
			return nil, err
		}
		t.HolderGone = gone
	}
	if t.HeldBy == self {
		if h := dep.Annotations[perfv1.AnnotationTemplateHash]; h != "" && h != r.heldTemplateHash(s) {
			t.Changed = fmt.Sprintf("the pod template of Deployment %s was changed by someone else while the experiment held it (kubectl rollout undo or set env, a GitOps sync, another controller?): the window cannot be trusted", dep.Name)
		}
	}
	if t.HeldBy == self && dep.Annotations[perfv1.AnnotationOriginal] != "" {
		// Never capture again from a template this experiment may have toggled.
		t.Original = dep.Annotations[perfv1.AnnotationOriginal]
	} else if exp.Spec.HasToggle() {
		captureTarget(exp, dep, t)
		for _, arm := range exp.Spec.Arms() {
			if _, err := r.drivers().For(arm.Toggle); err != nil && t.CaptureError == "" {
				// Refused before anything changes, rather than at the switch.
				t.Original, t.CaptureError, t.CaptureReason = "", err.Error(), perfv1.ReasonInvalidSpec
			}
		}
	}
	return t, nil
}

// heldTemplateHash is templateHash of the held target's template, computed
// once per version of the Deployment: every reconcile compares it, and
// encoding the template each time was 7 % of the operator's CPU at N=1000.
func (r *PerfExperimentReconciler) heldTemplateHash(s *scope) string {
	p := r.samples.get(client.ObjectKeyFromObject(s.exp))
	dep := s.target
	if p.hashOf != dep.UID || p.hashAt != dep.ResourceVersion || p.hash == "" {
		p.hashOf, p.hashAt, p.hash = dep.UID, dep.ResourceVersion, templateHash(&dep.Spec.Template)
	}
	return p.hash
}

// captureTarget records the toggle's original state, or why the toggle cannot be
// applied to this target.
func captureTarget(exp *perfv1.PerfExperiment, dep *appsv1.Deployment, t *engine.Target) {
	// Every variant changes the same thing (validation), so the first one's
	// record restores any of them.
	rec, err := toggle.Capture(exp.Spec.Switch(), &dep.Spec.Template, exp.Spec.Target.Container)
	if errors.Is(err, toggle.ErrContainerNotFound) {
		t.CaptureError, t.CaptureReason = err.Error(), perfv1.ReasonContainerNotFound
		return
	}
	if err == nil {
		t.Original, err = rec.Marshal()
	}
	if err != nil {
		t.CaptureError, t.CaptureReason = fmt.Sprintf("toggle cannot be applied to Deployment %q: %v", dep.Name, err), perfv1.ReasonInvalidSpec
	}
}

// missingLimits names the limits utilisation needs that the container lacks.
func missingLimits(limits corev1.ResourceList) string {
	_, cpu := limits[corev1.ResourceCPU]
	_, mem := limits[corev1.ResourceMemory]
	switch {
	case !cpu && !mem:
		return "cpu limit and no memory limit"
	case !cpu:
		return "cpu limit"
	case !mem:
		return "memory limit"
	}
	return ""
}

func (r *PerfExperimentReconciler) holderGone(ctx context.Context, holder string) (bool, error) {
	ns, name, ok := strings.Cut(holder, "/")
	if !ok || name == "" {
		return true, nil // not a lock this operator wrote
	}
	err := r.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &perfv1.PerfExperiment{})
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	return false, err
}

// rolloutOf summarises a Deployment's rollout the way `kubectl rollout status` does.
func rolloutOf(dep *appsv1.Deployment) engine.Rollout {
	r := engine.Rollout{ObservedGeneration: dep.Status.ObservedGeneration}
	if dep.Spec.ProgressDeadlineSeconds != nil {
		r.ProgressDeadline = time.Duration(*dep.Spec.ProgressDeadlineSeconds) * time.Second
	}
	for _, c := range dep.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Status == corev1.ConditionFalse && c.Reason == "ProgressDeadlineExceeded" {
			r.DeadlineExceeded = true
		}
	}
	want := int32(1)
	if dep.Spec.Replicas != nil {
		want = *dep.Spec.Replicas
	}
	s := dep.Status
	switch {
	case s.ObservedGeneration < dep.Generation:
		r.Message = fmt.Sprintf("waiting for the Deployment controller to observe generation %d", dep.Generation)
	case s.UpdatedReplicas < want:
		r.Message = fmt.Sprintf("%d of %d replicas updated", s.UpdatedReplicas, want)
	case s.Replicas > s.UpdatedReplicas:
		r.Message = fmt.Sprintf("%d old replicas pending termination", s.Replicas-s.UpdatedReplicas)
	case s.AvailableReplicas < s.UpdatedReplicas:
		r.Message = fmt.Sprintf("%d of %d updated replicas available", s.AvailableReplicas, s.UpdatedReplicas)
	default:
		r.Complete = true
	}
	return r
}

// observeJobs reads the experiment's k6 Jobs and their pods from the caches,
// and returns the pods too (the live load checks read them). They are the
// cached objects themselves, only read (jobView, readLive): every reconcile
// reads them.
func (r *PerfExperimentReconciler) observeJobs(ctx context.Context, exp *perfv1.PerfExperiment) (map[string]*engine.Job, []*corev1.Pod, error) {
	jobs, pods, err := r.k6Of(ctx, exp)
	if err != nil {
		return nil, nil, err
	}
	byJob := map[string][]*corev1.Pod{}
	for _, p := range pods {
		byJob[p.Labels[batchv1.JobNameLabel]] = append(byJob[p.Labels[batchv1.JobNameLabel]], p)
	}
	out := map[string]*engine.Job{}
	for _, j := range jobs {
		if !metav1.IsControlledBy(j, exp) {
			continue
		}
		out[j.Name] = jobView(j, byJob[j.Name])
	}
	return out, pods, nil
}

// k6Of returns the experiment's cached k6 Jobs and pods: from the informers'
// experimentIndex, or, without it, by label from the cache.
func (r *PerfExperimentReconciler) k6Of(ctx context.Context, exp *perfv1.PerfExperiment) ([]*batchv1.Job, []*corev1.Pod, error) {
	if r.stores.jobs != nil {
		key := experimentIndexKey(exp.Namespace, exp.Name)
		jobs, err := fromIndex[*batchv1.Job](r.stores.jobs, key)
		if err != nil {
			return nil, nil, err
		}
		pods, err := fromIndex[*corev1.Pod](r.stores.pods, key)
		if err != nil {
			return nil, nil, err
		}
		return jobs, pods, nil
	}
	sel := client.MatchingLabels{perfv1.LabelExperiment: exp.Name}
	var jobs batchv1.JobList
	if err := r.List(ctx, &jobs, client.InNamespace(exp.Namespace), sel, client.UnsafeDisableDeepCopy); err != nil {
		return nil, nil, err
	}
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(exp.Namespace), sel, client.UnsafeDisableDeepCopy); err != nil {
		return nil, nil, err
	}
	return pointers(jobs.Items), pointers(pods.Items), nil
}

// fromIndex returns the objects of type T under key in ix's experimentIndex.
func fromIndex[T any](ix toolscache.Indexer, key string) ([]T, error) {
	objs, err := ix.ByIndex(experimentIndex, key)
	if err != nil {
		return nil, err
	}
	out := make([]T, 0, len(objs))
	for _, o := range objs {
		if t, ok := o.(T); ok {
			out = append(out, t)
		}
	}
	return out, nil
}

// pointers returns pointers to items' elements.
func pointers[T any](items []T) []*T {
	out := make([]*T, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}

// jobView turns a Job and its pods into what the engine needs: when the load was
// complete (all pods running), whether it ended, and the pods' results.
func jobView(j *batchv1.Job, pods []*corev1.Pod) *engine.Job {
	v := &engine.Job{Name: j.Name}
	for _, c := range j.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			v.Complete = true
			t := c.LastTransitionTime.Time
			v.Finished = &t
		case batchv1.JobFailed:
			v.Failed, v.FailureMessage = true, fmt.Sprintf("%s: %s", c.Reason, c.Message)
		}
	}
	// A slow window runs on fewer pods than spec.load.k6.parallelism (each pod
	// needs at least 1 req/s), so count the Job's own completions.
	want := 1
	if j.Spec.Completions != nil {
		want = int(*j.Spec.Completions)
	}
	var started time.Time
	running, terminated := 0, 0
	for _, p := range pods {
		for _, cs := range p.Status.ContainerStatuses {
			switch {
			case cs.State.Running != nil:
				running++
				if t := cs.State.Running.StartedAt.Time; t.After(started) {
					started = t
				}
			case cs.State.Terminated != nil:
				running++
				terminated++
				term := cs.State.Terminated
				if t := term.StartedAt.Time; t.After(started) {
					started = t
				}
				if v.Complete || v.Failed {
					res, err := k6.ParseResult(term.Message)
					if err != nil {
						v.ResultErrors = append(v.ResultErrors, fmt.Sprintf("pod %s: %v", p.Name, err))
					} else {
						v.Results = append(v.Results, res)
					}
				}
			}
		}
	}
	if running >= want && !started.IsZero() {
		v.Started = &started
	}
	v.ResultsPending = v.Complete && terminated < want
	return v
}

// scriptMissing checks spec.load.scriptRef with one uncached read.
func (r *PerfExperimentReconciler) scriptMissing(ctx context.Context, exp *perfv1.PerfExperiment) (string, error) {
	ref := exp.Spec.Load.ScriptRef
	cm := &corev1.ConfigMap{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: exp.Namespace, Name: ref.Name}, cm); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Sprintf("ConfigMap %q (spec.load.scriptRef.name) not found in namespace %q", ref.Name, exp.Namespace), nil
		}
		return "", err
	}
	if _, ok := cm.Data[ref.Key]; !ok {
		return fmt.Sprintf("ConfigMap %q has no key %q (spec.load.scriptRef.key)", ref.Name, ref.Key), nil
	}
	return "", nil
}
