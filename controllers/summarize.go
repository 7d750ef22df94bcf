package controllers

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
	"perfexp.dev/perf-operator/internal/engine"
)

// retryBase is the first wait after a failed action; it doubles up to
// engine.RevertRetryMax. The reconcile asks for its own requeue instead of
// returning the error, so a failing revert or an unreachable API server is
// retried within seconds of recovering, not after controller-runtime's
// exponential backoff of minutes.
const retryBase = time.Second

// summarize records the reconcile's outcome in one status patch and says when
// to look again. A decision whose actions all succeeded is persisted as the
// engine made it. Otherwise the persisted status is kept (it must not claim
// what did not happen), with what the failed attempt established added: pods
// the toggle may now be on, the RevertFailing condition and Warning event of a
// failing revert, a refused toggle for the engine to abort on, and the
// Reconciling condition naming the failed action.
func (r *PerfExperimentReconciler) summarize(ctx context.Context, s *scope, d *engine.Decision, out outcome) (ctrl.Result, error) {
	key := client.ObjectKeyFromObject(s.exp)
	p := r.samples.get(key)
	if !out.failed() {
		p.failedTries = 0
		if err := r.writeStatus(ctx, s.before, s.exp, *d); err != nil {
			if apierrors.IsConflict(err) {
				return ctrl.Result{Requeue: true}, nil // decided on a stale copy; decide again
			}
			return ctrl.Result{}, err
		}
		return ctrl.Result{RequeueAfter: requeueAfter(*d)}, nil
	}
	log.FromContext(ctx).Info("action failed", "action", out.action, "error", out.err.Error(), "refused", out.refused)
	if out.refused {
		p.toggleError = out.err.Error()
	}
	exp, before := s.exp, s.before
	exp.Status = *before.Status.DeepCopy()
	if t := exp.Status.Toggle; t != nil && out.podsKnown {
		t.Pods = out.pods
	}
	now := metav1.NewTime(r.Clock.Now())
	switch {
	case out.revertFailed():
		c := meta.FindStatusCondition(exp.Status.Conditions, perfv1.ConditionRevertFailing)
		if c == nil || c.Status != metav1.ConditionTrue {
			r.Recorder.Event(exp, "Warning", perfv1.ReasonRevertFailing, out.err.Error())
		}
		meta.SetStatusCondition(&exp.Status.Conditions, metav1.Condition{Type: perfv1.ConditionRevertFailing, Status: metav1.ConditionTrue,
			Reason: perfv1.ReasonRevertFailing, Message: out.err.Error(), ObservedGeneration: exp.Generation, LastTransitionTime: now})
	case !exp.Status.Phase.IsTerminal() && !out.refused:
		c := meta.FindStatusCondition(exp.Status.Conditions, perfv1.ConditionReconciling)
		if c == nil || c.Reason != perfv1.ReasonRetrying {
			r.Recorder.Event(exp, "Warning", perfv1.ReasonRetrying, out.err.Error())
		}
		meta.SetStatusCondition(&exp.Status.Conditions, metav1.Condition{Type: perfv1.ConditionReconciling, Status: metav1.ConditionTrue,
			Reason: perfv1.ReasonRetrying, Message: out.err.Error(), ObservedGeneration: exp.Generation, LastTransitionTime: now})
	}
	if !equality.Semantic.DeepEqual(before.Status, exp.Status) {
		patch := client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})
		if err := r.Status().Patch(ctx, exp, patch); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			log.FromContext(ctx).Error(err, "recording the failed action in status")
		}
	}
	if out.refused {
		return ctrl.Result{Requeue: true}, nil // the engine aborts and reverts at once
	}
	wait := retryBase << min(p.failedTries, 4)
	p.failedTries++
	return ctrl.Result{RequeueAfter: min(wait, engine.RevertRetryMax)}, nil
}

// writeStatus records events and patches the status once, if it changed and
// more than pending samples changed (those are written in batches).
func (r *PerfExperimentReconciler) writeStatus(ctx context.Context, before, exp *perfv1.PerfExperiment, d engine.Decision) error {
	key := client.ObjectKeyFromObject(exp)
	if removedFinalizer(d) {
		r.samples.drop(key)
		setPhase(key, "")
		return nil // the object is going away; there is no status to write
	}
	p := r.samples.get(key)
	p.toggleError = ""
	exp.Status = d.Status
	if p.provider != nil {
		exp.Status.MetricsSource = perfv1.MetricsSource(p.provider.Name())
	}
	setConditions(&exp.Status, exp.Spec.SuccessCriteria, exp.Generation, d, r.Clock.Now())
	exp.Status.ObservedGeneration = exp.Generation
	if !flushDue(&before.Status, &exp.Status, p) || equality.Semantic.DeepEqual(before.Status, exp.Status) {
		return nil // nothing a reader can see changed: no request
	}
	for _, e := range d.Events {
		typ := "Normal"
		if e.Warning {
			typ = "Warning"
		}
		r.Recorder.Event(exp, typ, e.Reason, e.Message)
	}
	// The optimistic lock refuses a status computed from a stale cached copy
	// (the cache can lag behind this reconciler's own last write): merge
	// patches replace lists wholesale, so a stale base would drop the windows'
	// latest samples. The retry decides again on fresh data; actions are
	// idempotent.
	patch := client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})
	if err := r.Status().Patch(ctx, exp, patch); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	recordWrite(key, &before.Status, &exp.Status, judged(&before.Status, &exp.Status, p))
	p.flushed()
	if exp.Status.Phase.IsTerminal() {
		r.samples.drop(key)
	}
	log.FromContext(ctx).V(1).Info("reconciled", "phase", exp.Status.Phase, "actions", len(d.Actions), "requeueAfter", d.RequeueAfter)
	return nil
}
