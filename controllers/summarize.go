package controllers

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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
	if apierrors.IsConflict(out.err) && !out.refused {
		// Decided on a stale copy (the cache behind our own last write), or the
		// object changed meanwhile: nothing was done; decide again.
		return ctrl.Result{Requeue: true}, nil
	}
	log.FromContext(ctx).Info("action failed", "action", out.action, "error", out.err.Error(), "refused", out.refused)
	if out.refused {
		p.toggleError = out.err.Error()
	}
	exp, before := s.exp, s.before
	exp.Status = *before.Status.DeepCopy()
	if d != nil && out.revertFailed() && d.Status.Phase.IsTerminal() {
		// The run has ended (an abort, a breach, the last window) and only
		// switching back failed: the ending and its reason are recorded now,
		// with the toggle still marked on; the terminal phase keeps retrying
		// the revert until it goes through or toggle.onRevertFailure decides.
		r.recordEnding(exp, d, before.Status.Toggle)
	}
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
	if !sameStatus(&before.Status, &exp.Status) {
		if err := r.patchStatusFrom(ctx, before, exp); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
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
	setConditions(&exp.Status, &exp.Spec, exp.Generation, d, r.Clock.Now())
	exp.Status.ObservedGeneration = exp.Generation
	if !flushDue(&before.Status, &exp.Status, p, changeSoon(&exp.Spec, d, r.Clock.Now())) || sameStatus(&before.Status, &exp.Status) {
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
	if err := r.patchStatus(ctx, before, exp); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	logTransitions(log.FromContext(ctx), &before.Status, &exp.Status)
	recordWrite(key, &before.Status, &exp.Status, judged(&before.Status, &exp.Status, p))
	p.flushed()
	if exp.Status.Phase.IsTerminal() {
		r.samples.drop(key)
	}
	log.FromContext(ctx).V(1).Info("reconciled", "phase", exp.Status.Phase, "actions", len(d.Actions), "requeueAfter", d.RequeueAfter)
	return nil
}

// recordEnding puts an ending decision whose revert failed into exp's status:
// its phase, abort, windows and events, but the toggle as it still is.
func (r *PerfExperimentReconciler) recordEnding(exp *perfv1.PerfExperiment, d *engine.Decision, toggle *perfv1.ToggleStatus) {
	exp.Status = *d.Status.DeepCopy()
	if toggle != nil && exp.Status.Toggle != nil {
		exp.Status.Toggle.Applied, exp.Status.Toggle.RevertedAt, exp.Status.Toggle.Pods = toggle.Applied, toggle.RevertedAt, toggle.Pods
	}
	setConditions(&exp.Status, &exp.Spec, exp.Generation, *d, r.Clock.Now())
	exp.Status.ObservedGeneration = exp.Generation
	for _, e := range d.Events {
		if e.Reason == perfv1.ReasonToggleOff || e.Reason == perfv1.ReasonLockReleased {
			continue // not done yet
		}
		typ := "Normal"
		if e.Warning {
			typ = "Warning"
		}
		r.Recorder.Event(exp, typ, e.Reason, e.Message)
	}
}

// patchStatus writes exp's status over before's with the optimistic lock. A
// conflict caused by someone else changing the object's metadata or spec (a
// label, an annotation, spec.abort) while its status stayed as this decision
// read it does not undo the decision: its actions have already happened (a
// revert sent cannot be unsent), so the status is written onto the fresh
// object. Only a status that moved on makes the reconcile decide again.
func (r *PerfExperimentReconciler) patchStatus(ctx context.Context, before, exp *perfv1.PerfExperiment) error {
	err := r.patchStatusFrom(ctx, before, exp)
	if !apierrors.IsConflict(err) {
		return err
	}
	fresh := &perfv1.PerfExperiment{}
	if gerr := r.APIReader.Get(ctx, client.ObjectKeyFromObject(exp), fresh); gerr != nil {
		return err
	}
	fresh.Default()
	if !sameStatus(&fresh.Status, &before.Status) {
		return err
	}
	next := fresh.DeepCopy()
	next.Status = exp.Status
	if err := r.patchStatusFrom(ctx, fresh, next); err != nil {
		return err
	}
	exp.ResourceVersion = next.ResourceVersion
	return nil
}

// patchStatusFrom writes exp's status over base's: a JSON merge patch from the
// one status to the other, under base's resourceVersion (the optimistic lock),
// sent as the status subresource ignores everything but the status. It is what
// client.MergeFromWithOptimisticLock sends, computed from the two statuses
// alone instead of from deep copies of the two whole experiments, and the API
// server answers with the experiment's metadata only (the new resourceVersion
// is all the reconciler reads back) instead of the whole object to decode.
// With StatusMetadata it goes through client-go's metadata client, addressed by
// resource, with no REST mapping per write. The
// status write was the largest item of the operator's CPU at N=1000
// (docs/scale.md).
func (r *PerfExperimentReconciler) patchStatusFrom(ctx context.Context, base, exp *perfv1.PerfExperiment) error {
	patch := statusMergePatch{from: base, to: exp}
	var version string
	if r.StatusMetadata != nil {
		data, err := patch.Data(nil)
		if err != nil {
			return err
		}
		got, err := r.StatusMetadata.Resource(perfv1.GroupVersion.WithResource("perfexperiments")).Namespace(exp.Namespace).
			Patch(ctx, exp.Name, patch.Type(), data, metav1.PatchOptions{}, "status")
		if err != nil {
			return err
		}
		version = got.ResourceVersion
	} else {
		meta := &metav1.PartialObjectMetadata{}
		meta.SetGroupVersionKind(perfv1.GroupVersion.WithKind("PerfExperiment"))
		meta.Namespace, meta.Name = exp.Namespace, exp.Name
		if err := r.Status().Patch(ctx, meta, patch); err != nil {
			return err
		}
		version = meta.ResourceVersion
	}
	exp.ResourceVersion = version
	// decidedOnCurrent trusts a decision made on this version: the write is
	// this reconciler's own.
	r.samples.get(client.ObjectKeyFromObject(exp)).written = exp.ResourceVersion
	return nil
}

// statusMergePatch is the JSON merge patch from from's status to to's, with
// from's resourceVersion.
type statusMergePatch struct{ from, to *perfv1.PerfExperiment }

func (p statusMergePatch) Type() types.PatchType { return types.MergePatchType }

func (p statusMergePatch) Data(client.Object) ([]byte, error) {
	version := p.from.ResourceVersion
	if version == "" {
		return nil, fmt.Errorf("cannot use the optimistic lock: PerfExperiment %s has no resourceVersion", p.from.Name)
	}
	before, err := json.Marshal(&p.from.Status)
	if err != nil {
		return nil, err
	}
	after, err := json.Marshal(&p.to.Status)
	if err != nil {
		return nil, err
	}
	diff, err := mergePatch(before, after)
	if err != nil {
		return nil, err
	}
	type meta struct {
		ResourceVersion string `json:"resourceVersion"`
	}
	return json.Marshal(struct {
		Metadata meta            `json:"metadata"`
		Status   json.RawMessage `json:"status"`
	}{meta{version}, diff})
}

// mergePatch is the JSON merge patch (RFC 7386) from one JSON object to
// another, as jsonpatch.CreateMergePatch makes it, decoding only the top
// level: a member whose encoding did not change is left out undecoded, a list
// or scalar that changed is sent as it is (a merge patch replaces either
// whole), a member gone is sent as null, and only an object member that
// changed is diffed member by member. CreateMergePatch decodes both whole
// documents into maps; for a status, that meant every window's series at
// every write, 7 % of the operator's allocations at N=1000 (docs/scale.md).
// Both documents must encode their members deterministically (encoding/json
// of the same values does).
func mergePatch(before, after []byte) ([]byte, error) {
	var a, b map[string]json.RawMessage
	if err := json.Unmarshal(before, &a); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(after, &b); err != nil {
		return nil, err
	}
	out := make(map[string]json.RawMessage, len(b))
	for k, bv := range b {
		av, ok := a[k]
		switch {
		case ok && bytes.Equal(av, bv):
		case ok && isJSONObject(av) && isJSONObject(bv):
			d, err := jsonpatch.CreateMergePatch(av, bv)
			if err != nil {
				return nil, err
			}
			if !bytes.Equal(d, []byte("{}")) {
				out[k] = d
			}
		default:
			out[k] = bv
		}
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			out[k] = json.RawMessage("null")
		}
	}
	return json.Marshal(out)
}

func isJSONObject(v json.RawMessage) bool {
	v = bytes.TrimLeft(v, " \t\r\n")
	return len(v) > 0 && v[0] == '{'
}
