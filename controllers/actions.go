package controllers

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
	"perfexp.dev/perf-operator/internal/engine"
	"perfexp.dev/perf-operator/internal/k6"
	"perfexp.dev/perf-operator/internal/toggle"
)

// toggleError is a toggle that cannot be applied for a reason retrying will not
// fix (an admin endpoint refused it). The engine aborts and reverts on it.
type toggleError struct {
	err  error
	pods []string // pods the toggle may still be on
}

func (e *toggleError) Error() string { return e.err.Error() }

// execute runs the decision's actions in order and stops at the first error.
// Every action is idempotent, so a retry after a partial run is safe. Outcomes
// the status must record (the target's generation, the pods a runtime toggle
// reached) are written into d.Status.
func (r *PerfExperimentReconciler) execute(ctx context.Context, exp *perfv1.PerfExperiment, d *engine.Decision) error {
	// A runtime toggle is checked against the API server once per decision,
	// before its first request: later requests of the same decision are bound by
	// the first. The abort that reacts to a refused toggle is decided on the
	// experiment the refused apply was checked against, in the same reconcile.
	checked := exp.Spec.Toggle.RollsPods() || reactsToToggleFailure(exp, d)
	for _, a := range d.Actions {
		var err error
		switch a.Kind {
		case engine.ActionAcquireLock:
			err = r.updateTarget(ctx, exp, func(dep *appsv1.Deployment) error { return lock(exp, dep, a.Original) })
		case engine.ActionEnsureScript:
			err = r.ensureScript(ctx, exp)
		case engine.ActionApplyToggle, engine.ActionRevertToggle:
			if !checked {
				err = r.decidedOnCurrent(ctx, exp)
				checked = err == nil
			}
			if err == nil {
				err = r.toggle(ctx, exp, d, a)
			}
		case engine.ActionCreateJob:
			err = r.createJob(ctx, exp, a)
		case engine.ActionDeleteJob:
			job := &batchv1.Job{}
			job.Namespace, job.Name = exp.Namespace, a.JobName
			err = client.IgnoreNotFound(r.Delete(ctx, job, client.PropagationPolicy("Background")))
		case engine.ActionReleaseLock:
			err = r.updateTarget(ctx, exp, func(dep *appsv1.Deployment) error { unlock(exp, dep); return nil })
		case engine.ActionRemoveFinalizer:
			if controllerutil.RemoveFinalizer(exp, perfv1.Finalizer) {
				err = client.IgnoreNotFound(r.Update(ctx, exp))
			}
		}
		if err != nil {
			return fmt.Errorf("%s: %w", a.Kind, err)
		}
	}
	return nil
}

// updateTarget reads the target uncached, changes it and writes it back if it
// changed, retrying on conflicts. A target that is gone needs no change.
func (r *PerfExperimentReconciler) updateTarget(ctx context.Context, exp *perfv1.PerfExperiment, change func(*appsv1.Deployment) error) error {
	_, err := r.updateTargetGen(ctx, exp, change)
	return err
}

func (r *PerfExperimentReconciler) updateTargetGen(ctx context.Context, exp *perfv1.PerfExperiment, change func(*appsv1.Deployment) error) (int64, error) {
	var gen int64
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		dep := &appsv1.Deployment{}
		if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: exp.Namespace, Name: exp.Spec.Target.Deployment}, dep); err != nil {
			return err
		}
		orig := dep.DeepCopy()
		if err := change(dep); err != nil {
			return err
		}
		gen = dep.Generation
		if equality.Semantic.DeepEqual(orig, dep) {
			return nil
		}
		if err := r.Update(ctx, dep); err != nil {
			return err
		}
		gen = dep.Generation
		return nil
	})
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	return gen, err
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

func unlock(exp *perfv1.PerfExperiment, dep *appsv1.Deployment) {
	if dep.Annotations[perfv1.AnnotationLock] != exp.Namespace+"/"+exp.Name {
		return
	}
	delete(dep.Annotations, perfv1.AnnotationLock)
	delete(dep.Annotations, perfv1.AnnotationOriginal)
	delete(dep.Labels, perfv1.LabelExperiment)
	if len(dep.Annotations) == 0 {
		dep.Annotations = nil
	}
	if len(dep.Labels) == 0 {
		dep.Labels = nil
	}
}

// toggle applies or reverts the toggle. Pod-template toggles change the
// Deployment (idempotently, from the original-state record); runtime toggles send
// requests to the ready target pods.
func (r *PerfExperimentReconciler) toggle(ctx context.Context, exp *perfv1.PerfExperiment, d *engine.Decision, a engine.Action) error {
	apply := a.Kind == engine.ActionApplyToggle
	// A runtime revert with no pods to switch back needs no record: a
	// deleted target leaves none.
	record := func() (toggle.Record, error) {
		rec, err := toggle.ParseRecord(a.Original)
		if err != nil {
			return rec, fmt.Errorf("original-state record unreadable: %w", err)
		}
		return rec, nil
	}
	if h := exp.Spec.Toggle.HTTP; h != nil {
		return r.runtimeToggle(ctx, exp, d, apply, runtimeSwitch{
			apply:  func(pods []toggle.Pod) ([]string, error) { return r.HTTP.Apply(ctx, h, pods) },
			revert: func(pods []toggle.Pod) error { return r.HTTP.Revert(ctx, h, pods) },
		})
	}
	if e := exp.Spec.Toggle.Exec; e != nil {
		// The command runs in the container the record resolved at capture.
		return r.runtimeToggle(ctx, exp, d, apply, runtimeSwitch{
			apply: func(pods []toggle.Pod) ([]string, error) {
				rec, err := record()
				if err != nil {
					return nil, err
				}
				return r.Exec.Apply(ctx, e, exp.Namespace, rec.Container, pods)
			},
			revert: func(pods []toggle.Pod) error {
				rec, err := record()
				if err != nil {
					return err
				}
				return r.Exec.Revert(ctx, e, exp.Namespace, rec.Container, pods)
			},
		})
	}
	rec, err := record()
	if err != nil {
		return err
	}
	gen, err := r.updateTargetGen(ctx, exp, func(dep *appsv1.Deployment) error {
		if apply {
			return toggle.Apply(&exp.Spec.Toggle, &dep.Spec.Template, rec)
		}
		return toggle.Revert(&dep.Spec.Template, rec)
	})
	if err != nil {
		return err
	}
	if d.Status.Toggle != nil && gen > 0 {
		d.Status.Toggle.TargetGeneration = gen
	}
	return nil
}

// runtimeSwitch is how a runtime toggle (http or exec) switches a set of pods.
type runtimeSwitch struct {
	apply  func([]toggle.Pod) ([]string, error)
	revert func([]toggle.Pod) error
}

// runtimeToggle switches the ready target pods on, or switches back those the
// status says it reached.
func (r *PerfExperimentReconciler) runtimeToggle(ctx context.Context, exp *perfv1.PerfExperiment, d *engine.Decision, apply bool, sw runtimeSwitch) error {
	pods, err := r.targetPods(ctx, exp)
	if err != nil {
		return err
	}
	if apply {
		applied, err := sw.apply(pods)
		if err != nil {
			// Apply already reverted the pods it reached; applied lists those
			// whose revert failed too. The abort that follows reverts them.
			return &toggleError{err: err, pods: applied}
		}
		if d.Status.Toggle != nil {
			d.Status.Toggle.Pods = applied
		}
		return nil
	}
	// Revert only where the toggle was applied; pods that were replaced since
	// lost the runtime state with their process. The decision's status, not the
	// persisted one, says where that is: one decision may revert twice (the last
	// treatment ends and the run finishes), and the second must not send the
	// revert again to pods the first already switched back.
	var applied []string
	if d.Status.Toggle != nil {
		applied = d.Status.Toggle.Pods
	}
	want := map[string]bool{}
	for _, p := range applied {
		want[p] = true
	}
	var targets []toggle.Pod
	for _, p := range pods {
		if want[p.Name] {
			targets = append(targets, p)
		}
	}
	if len(targets) == 0 {
		// Nothing to switch back: no pod took the toggle, or all were replaced.
		if d.Status.Toggle != nil {
			d.Status.Toggle.Pods = nil
		}
		return nil
	}
	if err := sw.revert(targets); err != nil {
		return err
	}
	if d.Status.Toggle != nil {
		d.Status.Toggle.Pods = nil
	}
	return nil
}

// decidedOnCurrent makes sure a decision about to send a runtime toggle was made
// on the experiment as the API server has it now. The cache can lag behind the
// status this reconciler has just written: creating a window's Job (or releasing
// the target) re-queues the experiment before the status patch reaches the
// informer, and a decision taken again from the older status would send the
// toggle's requests a second time. Pod-template toggles need no such check (the
// uncached read-modify-write of the target is idempotent); a request to a pod is
// not. It costs one uncached read per decision that toggles at run time. A stale
// decision is a conflict: nothing has been sent or persisted, and the retry
// decides again.
func (r *PerfExperimentReconciler) decidedOnCurrent(ctx context.Context, exp *perfv1.PerfExperiment) error {
	cur := &perfv1.PerfExperiment{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(exp), cur); err != nil {
		return err
	}
	if cur.ResourceVersion != exp.ResourceVersion {
		return apierrors.NewConflict(perfv1.GroupVersion.WithResource("perfexperiments").GroupResource(), exp.Name,
			fmt.Errorf("decided on resourceVersion %s but the API server has %s; deciding again before sending the runtime toggle",
				exp.ResourceVersion, cur.ResourceVersion))
	}
	return nil
}

// reactsToToggleFailure reports whether d is the abort Reconcile decided after
// this reconcile's apply was refused: no decision made from the persisted status
// alone ends with ToggleFailed.
func reactsToToggleFailure(exp *perfv1.PerfExperiment, d *engine.Decision) bool {
	return exp.Status.Abort == nil && d.Status.Abort != nil && d.Status.Abort.Reason == perfv1.ReasonToggleFailed
}

// targetPods lists the target's ready pods with an address.
func (r *PerfExperimentReconciler) targetPods(ctx context.Context, exp *perfv1.PerfExperiment) ([]toggle.Pod, error) {
	live, err := r.livePods(ctx, exp)
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
// window (names are deterministic), so it is never created twice.
func (r *PerfExperimentReconciler) createJob(ctx context.Context, exp *perfv1.PerfExperiment, a engine.Action) error {
	dep := &appsv1.Deployment{}
	podLabels := map[string]string{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: exp.Namespace, Name: exp.Spec.Target.Deployment}, dep); err == nil {
		podLabels = dep.Spec.Template.Labels
	}
	job, err := k6.BuildJob(exp, a.Window, podLabels)
	if err != nil {
		return err
	}
	job.Namespace = exp.Namespace
	if err := controllerutil.SetControllerReference(exp, job, r.Scheme); err != nil {
		return err
	}
	if err := r.Create(ctx, job); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}
