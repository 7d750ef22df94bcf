package v1alpha1

// Condition types. The first three follow the kstatus conventions, so Argo CD,
// Flux and `kubectl wait` read an experiment like any well-behaved resource:
//
//	running            Reconciling=True  Ready=False            Complete=False → InProgress
//	queued (held)      Reconciling=True (Queued) Ready=False    Complete=False → InProgress
//	waiting on cluster Stalled=True      Ready=False (Pending)  Complete=False → Failed until fixed
//	Succeeded          Ready=True                               Complete=True  → Current
//	Failed, Aborted    Stalled=True      Ready=False            Complete=True  → Failed
//
// A finished or aborted experiment is never left Reconciling. Complete is the
// condition a gate waits on (`kubectl wait --for=condition=Complete`): it turns
// True on every ending, good or bad, so a wait never runs into its timeout
// because the run was aborted; Passed then says whether it passed.
const (
	// ConditionComplete is True once the run has ended, whatever the outcome;
	// its reason is the phase: Succeeded, Failed or Aborted. False (reason
	// Progressing, Queued or the stall's reason) until then (polarity:
	// normal-true; the terminal condition `kubectl wait` ends on).
	ConditionComplete = "Complete"

	// ConditionReady is True when the experiment finished successfully and its
	// summary is final (polarity: normal-true).
	ConditionReady = "Ready"

	// ConditionReconciling is True while the run is making progress: preflight,
	// warm-up, windows, analysis (polarity: abnormal-true; removed when done).
	ConditionReconciling = "Reconciling"

	// ConditionStalled is True when the run cannot make progress without help: the
	// target is missing, has no limits or is held by an experiment that no
	// longer exists, or the
	// run ended Failed or Aborted (polarity: abnormal-true; removed otherwise).
	ConditionStalled = "Stalled"

	// ConditionToggleApplied is True while the toggle is in effect on the target,
	// that is, while the target differs from what it was before the experiment
	// (polarity: abnormal-true; a finished experiment always has it False).
	ConditionToggleApplied = "ToggleApplied"

	// ConditionTargetLocked is True while this experiment holds the lock on its
	// target Deployment (polarity: normal-true while running; False once released).
	ConditionTargetLocked = "TargetLocked"

	// ConditionPassed is the verdict as a condition: True (reason CriteriaMet)
	// when every stage met spec.successCriteria, False (CriteriaExceeded) when
	// one did not; Unknown with reason Inconclusive when the run completed but a
	// window could not be trusted, and Unknown with reason NoVerdict while the
	// run is going or when it ended Aborted or Failed (polarity: normal-true).
	// Present only with successCriteria.
	ConditionPassed = "Passed"

	// ConditionMetricsAvailable is False when the metrics source could not be
	// reached; affected windows are marked invalid (polarity: normal-true).
	ConditionMetricsAvailable = "MetricsAvailable"

	// ConditionRevertFailing is True while reverting the toggle fails: the
	// toggle may still be on the pods named in status.toggle.pods (or in the
	// template). Abnormal-true: it is absent or False in a healthy run.
	ConditionRevertFailing = "RevertFailing"
)

// Condition reasons. Event reasons are the same strings.
const (
	// ReasonProgressing: the run is moving through its phases.
	ReasonProgressing = "Progressing"
	// ReasonSucceeded: the run completed. ReasonFailed and ReasonAborted explain
	// Complete=True on the other endings (the phase's name).
	ReasonSucceeded = "Succeeded"
	ReasonFailed    = "Failed"
	ReasonAborted   = "Aborted"

	// ReasonTargetNotFound: spec.target.deployment does not exist in the namespace.
	ReasonTargetNotFound = "TargetNotFound"
	// ReasonTargetMissingLimits: the target container has no CPU or memory limit,
	// so utilisation cannot be measured.
	ReasonTargetMissingLimits = "TargetMissingLimits"
	// ReasonContainerNotFound: spec.target.container is not in the pod template.
	ReasonContainerNotFound = "ContainerNotFound"
	// ReasonQueued explains Reconciling=True while another experiment holds the
	// target's lock: this one starts when the holder ends; the message names the
	// holder. Queued is progress, not a stall: GitOps tools keep waiting.
	ReasonQueued = "Queued"
	// ReasonTargetHeld: the experiment that holds the target's lock no longer
	// exists, so only a person can release it (Stalled); the message names it.
	ReasonTargetHeld = "TargetHeld"
	// ReasonScriptNotFound: the ConfigMap or key of spec.load.scriptRef is missing.
	ReasonScriptNotFound = "ScriptNotFound"
	// ReasonInvalidSpec: the spec passed admission but cannot be run (for example
	// an object created while the CRD's validation was not installed, or windows
	// too short for the period the metrics source averages each sample over,
	// which its first answer shows: the run then ends Failed before its toggle
	// was ever applied).
	ReasonInvalidSpec = "InvalidSpec"

	// ReasonAbortRequested: spec.abort was set.
	ReasonAbortRequested = "AbortRequested"
	// ReasonHeapGrowth: the runaway-heap guardrail tripped.
	ReasonHeapGrowth = "HeapGrowth"
	// ReasonMemoryLimit: memory utilisation went past guardrails.heap.maxUtilization.
	ReasonMemoryLimit = "MemoryLimit"
	// ReasonOOMKilled: a target container was OOM-killed.
	ReasonOOMKilled = "OOMKilled"
	// ReasonRestarts: target containers restarted more than guardrails.maxRestarts.
	ReasonRestarts = "Restarts"
	// ReasonErrorRate: the load's error rate went past guardrails.errorRate.
	ReasonErrorRate = "ErrorRate"
	// ReasonRolloutStuck: a rollout caused by the toggle did not finish in time.
	ReasonRolloutStuck = "RolloutStuck"
	// ReasonToggleFailed: the toggle could not be applied (for example the admin
	// endpoint answered non-2xx); what was applied is reverted.
	ReasonToggleFailed = "ToggleFailed"
	// ReasonLoadFailed: a k6 Job failed, so the run could not be measured.
	ReasonLoadFailed = "LoadFailed"

	// ReasonToggleOn and ReasonToggleOff explain ConditionToggleApplied.
	ReasonToggleOn  = "ToggleOn"
	ReasonToggleOff = "ToggleOff"
	// ReasonLockHeld and ReasonLockReleased explain ConditionTargetLocked.
	ReasonLockHeld     = "LockHeld"
	ReasonLockReleased = "LockReleased"
	// ReasonCriteriaMet, ReasonCriteriaExceeded and ReasonNoVerdict explain
	// ConditionPassed.
	ReasonCriteriaMet      = "CriteriaMet"
	ReasonCriteriaExceeded = "CriteriaExceeded"
	ReasonNoVerdict        = "NoVerdict"
	ReasonInconclusive     = "Inconclusive"
	// ReasonMetricsOK and ReasonMetricsUnavailable explain ConditionMetricsAvailable.
	ReasonMetricsOK          = "MetricsOK"
	ReasonMetricsUnavailable = "MetricsUnavailable"
	// ReasonTargetChanged: someone else changed the target while the experiment
	// held it (its lock annotations were removed, as kubectl replace does, or its
	// pod template was changed, as rollout undo or set env do); the window is
	// invalid and the run aborts, reverting from the recorded original.
	ReasonTargetChanged = "TargetChanged"
	// ReasonRevertFailing explains ConditionRevertFailing=True; ReasonReverted
	// explains it False once the revert went through (or the pods were
	// replaced).
	ReasonRevertFailing = "RevertFailing"
	ReasonReverted      = "Reverted"
	// ReasonPodsRestarted: the revert kept failing for guardrails.revertTimeout
	// and the pods it could not reach were deleted (toggle.onRevertFailure
	// RestartPods); ReasonRevertAbandoned: they were kept (Keep).
	ReasonPodsRestarted   = "PodsRestarted"
	ReasonRevertAbandoned = "RevertAbandoned"
	// ReasonRetrying: an action failed for a reason that may pass (the API
	// server or a pod did not answer); the reconcile is retried with bounded
	// backoff and the message names the action.
	ReasonRetrying = "Retrying"
	// ReasonForbidden: the user who asked for the experiment may not do one of
	// its effects themselves (the message names the right and the kubectl
	// auth can-i line); nothing was changed.
	ReasonForbidden = "Forbidden"
	// ReasonNotAllowed: the experiment names a Prometheus URL or k6 image the
	// operator's installer does not allow (--allowed-prometheus-urls,
	// --allowed-k6-images); nothing was changed.
	ReasonNotAllowed = "NotAllowed"
	// ReasonWindowInvalid: a measured window cannot be trusted (event only).
	ReasonWindowInvalid = "WindowInvalid"
	// ReasonAnalysisIncomplete: a stage's full analysis failed and it was
	// summarised without resource series (event only).
	ReasonAnalysisIncomplete = "AnalysisIncomplete"
)

// Annotations and labels the operator puts on objects it touches.
const (
	// AnnotationLock on the target Deployment names the experiment
	// (namespace/name) that holds it; it is the lock.
	AnnotationLock = "perfexp.dev/locked-by"
	// AnnotationOriginal on the target Deployment keeps the toggle's original
	// state, written before the toggle is applied, so it can be restored whatever
	// happens to the experiment's status.
	AnnotationOriginal = "perfexp.dev/original"
	// LabelExperiment on k6 Jobs and pods names the experiment that owns them; the
	// operator's caches are filtered by it.
	LabelExperiment = "perfexp.dev/experiment"
	// AnnotationTemplateHash on the target Deployment is the digest of the pod
	// template as the holding experiment last wrote (or found) it, written in
	// the same update; a template that no longer matches it was changed by
	// someone else.
	AnnotationTemplateHash = "perfexp.dev/template-hash"
	// AnnotationRequestedBy, -UID and -Groups on an experiment are who created
	// it or last changed its spec, stamped by the chart's
	// MutatingAdmissionPolicy from the API server's record of the request; the
	// operator checks with a SubjectAccessReview that this user may do each of
	// the experiment's effects themselves.
	AnnotationRequestedBy       = "perfexp.dev/requested-by"
	AnnotationRequestedByUID    = "perfexp.dev/requested-by-uid"
	AnnotationRequestedByGroups = "perfexp.dev/requested-by-groups"
	// Finalizer makes deletion wait until the toggle is reverted, the load stopped
	// and the lock released.
	Finalizer = "perfexp.dev/cleanup"
)
