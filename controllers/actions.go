package controllers

import (
	"context"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
	"perfexp.dev/perf-operator/internal/engine"
	"perfexp.dev/perf-operator/internal/k6"
	"perfexp.dev/perf-operator/internal/toggle"
)

// outcome is what carrying out a decision did. The reconcile records every
// outcome in status (summarize): a decision's status is persisted only when all
// its actions succeeded; otherwise the persisted status is kept, with the facts
// the failed attempt established (pods the toggle may now be on, a failing
// revert) added, and the condition saying what failed.
type outcome struct {
	// err is the first failed action's error; nil when every action succeeded.
	err error
	// action is the kind of the action that failed.
	action engine.ActionKind
	// refused is true when applying the toggle failed for a reason retrying
	// will not fix (an admin endpoint answered no, the template cannot take
	// it): the engine aborts with ToggleFailed and reverts.
	refused bool
	// pods, when podsKnown, are exactly the pods a runtime toggle may be on
	// after the failure; they replace status.toggle.pods.
	pods      []string
	podsKnown bool
}

func (o outcome) failed() bool { return o.err != nil }

// revertFailed reports whether the failure was the toggle's revert.
func (o outcome) revertFailed() bool { return o.err != nil && o.action == engine.ActionRevertToggle }

// execute runs the decision's actions in order and stops at the first failure.
// Every action is idempotent, so a retry after a partial run is safe. Outcomes
// the status must record (the target's generation, the pods a runtime toggle
// reached) are written into d.Status.
func (r *PerfExperimentReconciler) execute(ctx context.Context, s *scope, d *engine.Decision) outcome {
	exp := s.exp
	checked := false
	for _, a := range d.Actions {
		var out outcome
		if changesTheTarget(a.Kind) && !checked {
			// A decision to toggle, revert, release or restart pods is made on
			// the status as the API server has it now, not on a cached copy
			// lagging behind this reconciler's own last write: one uncached
			// read per such decision.
			if out.err = r.decidedOnCurrent(ctx, exp); out.err != nil {
				out.action = a.Kind
				return out
			}
			checked = true
		}
		switch a.Kind {
		case engine.ActionAcquireLock:
			out.err = r.updateTarget(ctx, s, func(dep *appsv1.Deployment) error { return lock(exp, dep, a.Original) })
		case engine.ActionEnsureScript:
			out.err = r.ensureScript(ctx, exp)
		case engine.ActionApplyToggle:
			// Rights can be taken away mid-run: checked again before each stage's
			// toggle (answers are cached for the Reviewer's TTL).
			if out = r.reviewAgain(ctx, s); out.err == nil {
				out = r.toggle(ctx, s, d, a)
			}
		case engine.ActionRevertToggle:
			out = r.toggle(ctx, s, d, a)
		case engine.ActionCreateJob:
			out.err = r.createJob(ctx, s, a)
		case engine.ActionDeleteJob:
			job := &batchv1.Job{}
			job.Namespace, job.Name = exp.Namespace, a.JobName
			out.err = client.IgnoreNotFound(r.Delete(ctx, job, client.PropagationPolicy("Background")))
		case engine.ActionDeletePods:
			out.err = r.deletePods(ctx, s, a.Pods)
		case engine.ActionReleaseLock:
			out.err = r.updateTarget(ctx, s, func(dep *appsv1.Deployment) error { unlock(exp, dep); return nil })
		case engine.ActionRemoveFinalizer:
			if controllerutil.RemoveFinalizer(exp, perfv1.Finalizer) {
				out.err = client.IgnoreNotFound(r.Update(ctx, exp))
			}
		}
		if out.err != nil {
			out.action = a.Kind
			out.err = fmt.Errorf("%s: %w", a.Kind, out.err)
			return out
		}
		afterEffect(a.Kind)
	}
	return outcome{}
}

func changesTheTarget(k engine.ActionKind) bool {
	switch k {
	case engine.ActionApplyToggle, engine.ActionRevertToggle, engine.ActionReleaseLock, engine.ActionDeletePods:
		return true
	}
	return false
}

// updateTarget changes the target and writes it back if it changed, retrying
// on conflicts. The first attempt starts from the scope's copy; only a
// conflict reads it again (uncached). A target that is gone needs no change.
// The scope keeps the API server's answer, so later actions of the same
// reconcile start from it. While this experiment holds the lock, the template
// digest is written in the same update.
func (r *PerfExperimentReconciler) updateTarget(ctx context.Context, s *scope, change func(*appsv1.Deployment) error) error {
	if s.target == nil {
		return nil
	}
	first := true
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		dep := s.target.DeepCopy()
		if !first {
			if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(s.target), dep); err != nil {
				return err
			}
		}
		first = false
		orig := dep.DeepCopy()
		if err := change(dep); err != nil {
			return err
		}
		if dep.Annotations[perfv1.AnnotationLock] == s.self() {
			dep.Annotations[perfv1.AnnotationTemplateHash] = templateHash(&dep.Spec.Template)
		}
		if equality.Semantic.DeepEqual(orig, dep) {
			return nil
		}
		if err := r.Update(ctx, dep); err != nil {
			return err
		}
		s.target = dep
		return nil
	})
	if apierrors.IsNotFound(err) {
		s.target = nil
		return nil
	}
	return err
}

// lock takes the target: the lock and the original-state record are written in
// one update, before anything else on the target changes.
func lock(exp *perfv1.PerfExperiment, dep *appsv1.Deployment, original string) error {
	self := exp.Namespace + "/" + exp.Name
	if h := dep.Annotations[perfv1.AnnotationLock]; h != "" && h != self {
		return fmt.Errorf("Deployment %s was taken by %s", dep.Name, h)
	}
	if dep.Annotations == nil {
		dep.Annotations = map[string]string{}
	}
	if dep.Labels == nil {
		dep.Labels = map[string]string{}
	}
	if _, ok := dep.Annotations[perfv1.AnnotationOriginal]; !ok || dep.Annotations[perfv1.AnnotationLock] != self {
		dep.Annotations[perfv1.AnnotationOriginal] = original
	}
	dep.Annotations[perfv1.AnnotationLock] = self
	// The label puts the target into the operator's label-filtered cache.
	dep.Labels[perfv1.LabelExperiment] = exp.Name
	return nil
}

// unlock removes this experiment's lock, record and digest, and its label; the
// label alone is removed when the lock annotations were already taken away
// (kubectl replace), so the target leaves the operator's cache.
func unlock(exp *perfv1.PerfExperiment, dep *appsv1.Deployment) {
	holder := dep.Annotations[perfv1.AnnotationLock]
	self := exp.Namespace + "/" + exp.Name
	if holder != "" && holder != self {
		return
	}
	if holder == self {
		delete(dep.Annotations, perfv1.AnnotationLock)
		delete(dep.Annotations, perfv1.AnnotationOriginal)
		delete(dep.Annotations, perfv1.AnnotationTemplateHash)
	}
	if dep.Labels[perfv1.LabelExperiment] == exp.Name {
		delete(dep.Labels, perfv1.LabelExperiment)
	}
	if len(dep.Annotations) == 0 {
		dep.Annotations = nil
	}
	if len(dep.Labels) == 0 {
		dep.Labels = nil
	}
}

// reviewAgain refuses the toggle when its requester lost a right it needs.
func (r *PerfExperimentReconciler) reviewAgain(ctx context.Context, s *scope) outcome {
	if r.Reviewer == nil {
		return outcome{}
	}
	msg, err := r.Reviewer.forbidden(ctx, s.exp, rightsFor(s.exp))
	if err != nil {
		return outcome{err: err}
	}
	if msg != "" {
		return outcome{err: errors.New(msg), refused: true}
	}
	return outcome{}
}

// drivers returns the toggle drivers this operator can use.
func (r *PerfExperimentReconciler) drivers() toggle.Drivers {
	return toggle.Drivers{HTTP: r.HTTP, Exec: r.Exec}
}

// toggle applies or reverts the action's toggle (spec.toggle, or a variant's)
// through its driver. Template toggles change the Deployment (idempotently,
// from the original-state record); runtime toggles switch pods.
func (r *PerfExperimentReconciler) toggle(ctx context.Context, s *scope, d *engine.Decision, a engine.Action) outcome {
	apply := a.Kind == engine.ActionApplyToggle
	t := a.Toggle
	if t == nil {
		return outcome{err: fmt.Errorf("%s names no toggle (an engine bug)", a.Kind), refused: apply}
	}
	drv, err := r.drivers().For(t)
	if err != nil {
		return outcome{err: err, refused: apply}
	}
	rec, err := toggle.ParseRecord(a.Original)
	if err != nil && (apply || t.RollsPods() || len(a.Pods) > 0) {
		// A runtime revert with no pods to switch back needs no record: a
		// deleted target leaves none.
		return outcome{err: fmt.Errorf("original-state record unreadable: %w", err), refused: apply}
	}
	if !t.RollsPods() {
		return r.runtimeToggle(ctx, s, d, drv, rec, apply, a.Pods)
	}
	var refused error
	err = r.updateTarget(ctx, s, func(dep *appsv1.Deployment) error {
		t := toggle.Target{Namespace: s.exp.Namespace, Record: rec, Template: &dep.Spec.Template}
		var err error
		if apply {
			_, err = drv.Apply(ctx, t)
		} else {
			err = drv.Revert(ctx, t)
		}
		refused = err
		return err
	})
	if err != nil {
		// The template cannot take the toggle (a record that does not match it,
		// JAVA_TOOL_OPTIONS from a Secret): retrying will not fix it.
		return outcome{err: err, refused: apply && refused != nil}
	}
	if d.Status.Toggle != nil && s.target != nil {
		d.Status.Toggle.TargetGeneration = s.target.Generation
	}
	return outcome{}
}

// runtimeToggle switches the ready target pods on, or switches back every pod
// the toggle may be on. Before an apply sends anything, the pods it is about
// to reach are recorded in the persisted status (intent before effect): a
// crash with requests in flight, or a pod that refuses a repeated apply,
// leaves them listed, and every ending reverts them, whatever their readiness.
// A pod leaves the list only when it was switched back or is gone.
func (r *PerfExperimentReconciler) runtimeToggle(ctx context.Context, s *scope, d *engine.Decision, drv toggle.Driver, rec toggle.Record, apply bool, recorded []string) outcome {
	if apply {
		pods, err := s.readyPods(ctx, r.APIReader)
		if err != nil {
			return outcome{err: err}
		}
		var prior []string
		if t := s.before.Status.Toggle; t != nil {
			prior = t.Pods
		}
		intent := union(prior, podNames(pods))
		variant := ""
		if d.Status.Toggle != nil {
			variant = d.Status.Toggle.Variant
		}
		if err := r.recordIntent(ctx, s, intent, variant); err != nil {
			return outcome{err: err}
		}
		log.FromContext(ctx).Info("sending the toggle", "pods", podNames(pods), "resourceVersion", s.exp.ResourceVersion)
		stillOn, err := drv.Apply(ctx, toggle.Target{Namespace: s.exp.Namespace, Record: rec, Pods: pods})
		if err != nil {
			// Apply switched back the pods it reached where it could, and a pod
			// that refused this first apply never switched. A pod recorded by
			// an earlier attempt (a crash with the request in flight) may have
			// refused only because it is on already: it stays recorded, and
			// the abort that follows switches it back.
			return outcome{err: err, refused: true, pods: union(prior, stillOn), podsKnown: true}
		}
		if d.Status.Toggle != nil {
			d.Status.Toggle.Pods = intent
		}
		return outcome{}
	}
	// The decision's status, not the persisted one, says which pods remain: one
	// decision may revert twice (the last treatment ends and the run
	// finishes), and the second must not send the revert again to pods the
	// first already switched back.
	if d.Status.Toggle != nil {
		recorded = d.Status.Toggle.Pods
	}
	targets, err := s.podsNamed(ctx, r.APIReader, recorded)
	if err != nil {
		return outcome{err: err}
	}
	if len(targets) > 0 {
		log.FromContext(ctx).Info("reverting the toggle", "pods", podNames(targets), "resourceVersion", s.exp.ResourceVersion, "phase", s.exp.Status.Phase)
		if err := drv.Revert(ctx, toggle.Target{Namespace: s.exp.Namespace, Record: rec, Pods: targets}); err != nil {
			// The pods that failed stay recorded; those switched back are done.
			failed := toggle.FailedPods(err)
			return outcome{err: err, pods: failed, podsKnown: len(failed) > 0}
		}
	}
	// Every recorded pod is now switched back or gone.
	if d.Status.Toggle != nil {
		d.Status.Toggle.Pods = nil
	}
	return outcome{}
}

// recordIntent writes the pods an apply is about to reach, and which variant
// it sends (spec.variants; "" for spec.toggle), into the persisted status
// before anything is sent: whatever ending follows a crash reverts those pods
// with that variant's switch-back, not the one applied before it. The write
// carries the optimistic lock of the status the decision was made on, so a
// decision made on a stale copy sends nothing; the scope's base moves to the
// written version, so the reconcile's final status patch builds on it.
func (r *PerfExperimentReconciler) recordIntent(ctx context.Context, s *scope, pods []string, variant string) error {
	if s.before.Status.Toggle == nil {
		return fmt.Errorf("no toggle status to record the pods in")
	}
	// Sent even when the pods are already recorded (a retried apply): the
	// patch's optimistic lock is the check that this decision is current.
	next := s.before.DeepCopy()
	next.Status.Toggle.Pods = pods
	next.Status.Toggle.Variant = variant
	if err := r.patchStatusFrom(ctx, s.before, next); err != nil {
		return err
	}
	s.before = next // not changed in place: the base read is the cache's
	s.exp.ResourceVersion = next.ResourceVersion
	return nil
}

// deletePods deletes the named pods of the target, so that their Deployment
// replaces them with pods that never had the toggle.
func (r *PerfExperimentReconciler) deletePods(ctx context.Context, s *scope, names []string) error {
	for _, n := range names {
		pod := &corev1.Pod{}
		pod.Namespace, pod.Name = s.exp.Namespace, n
		if err := r.Delete(ctx, pod); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}

// decidedOnCurrent makes sure a decision about to change the target was made
// on the experiment as the API server has it now. The cache can lag behind
// the status this reconciler has just written, and a decision taken again
// from the older status would send a toggle or a revert a second time, or
// end the run on a stale view. A stale decision is a conflict: nothing has
// been sent or persisted, and the retry decides again.
//
// When the decision was made on the very version this reconciler wrote last
// (its own status write, whose resourceVersion it keeps), the cache has caught
// up with that write and the read is skipped: it was a third of a request per
// experiment per minute at N=1000 (docs/scale.md). A write by someone else
// after it is then seen as any change is, by the next reconcile.
func (r *PerfExperimentReconciler) decidedOnCurrent(ctx context.Context, exp *perfv1.PerfExperiment) error {
	if w := r.samples.get(client.ObjectKeyFromObject(exp)).written; w != "" && w == exp.ResourceVersion {
		return nil
	}
	cur := &perfv1.PerfExperiment{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(exp), cur); err != nil {
		return err
	}
	if cur.ResourceVersion != exp.ResourceVersion {
		return apierrors.NewConflict(perfv1.GroupVersion.WithResource("perfexperiments").GroupResource(), exp.Name,
			fmt.Errorf("decided on resourceVersion %s but the API server has %s; deciding again before changing the target",
				exp.ResourceVersion, cur.ResourceVersion))
	}
	return nil
}

func podNames(pods []toggle.Pod) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = p.Name
	}
	return out
}

// union returns a's names followed by b's that a lacks.
func union(a, b []string) []string {
	out := append([]string(nil), a...)
	seen := map[string]bool{}
	for _, n := range a {
		seen[n] = true
	}
	for _, n := range b {
		if !seen[n] {
			out = append(out, n)
			seen[n] = true
		}
	}
	return out
}

func (r *PerfExperimentReconciler) ensureScript(ctx context.Context, exp *perfv1.PerfExperiment) error {
	cm, err := k6.ScriptConfigMap(exp)
	if err != nil {
		return err
	}
	if err := controllerutil.SetControllerReference(exp, cm, r.Scheme); err != nil {
		return err
	}
	if err := r.Create(ctx, cm); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// createJob creates a window's load Job; one that exists already is the same
// window (names are deterministic), so it is never created twice. Its pods
// keep off the target's pods, whose labels come from the scope's target.
func (r *PerfExperimentReconciler) createJob(ctx context.Context, s *scope, a engine.Action) error {
	podLabels := map[string]string{}
	if s.target != nil {
		podLabels = s.target.Spec.Template.Labels
	}
	job, err := k6.BuildJob(s.exp, a.Window, podLabels)
	if err != nil {
		return err
	}
	job.Namespace = s.exp.Namespace
	if err := controllerutil.SetControllerReference(s.exp, job, r.Scheme); err != nil {
		return err
	}
	if err := r.Create(ctx, job); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}
