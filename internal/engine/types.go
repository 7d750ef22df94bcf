// Package engine decides, purely, what an experiment does next. Given the spec,
// the status as persisted, what the reconciler observed in the cluster and the
// time, Decide returns the new status, the actions to take and when to wake up.
// It makes no client calls and reads no clock: a two-hour experiment is tested in
// milliseconds, and an operator restarted at any moment carries on from status.
//
// The contract with the reconciler:
//   - every action is idempotent (creating an existing Job, applying an applied
//     toggle, releasing a released lock are no-ops), because a crash may land
//     between an action and the status write;
//   - the new status is persisted only when every action succeeded, so status never
//     claims what did not happen;
//   - a Job is deleted only once its results are in the persisted status, so a
//     window is never lost and never run twice.
package engine

import (
	"time"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
	"perfexp.dev/perf-operator/internal/guardrail"
	"perfexp.dev/perf-operator/internal/k6"
	"perfexp.dev/perf-operator/internal/metrics"
)

// Observed is what the reconciler saw in the cluster for one experiment.
type Observed struct {
	// Now is the reconcile's time, from an injected clock.
	Now time.Time
	// Deleting is true when the experiment has a deletion timestamp.
	Deleting bool
	// Target is the target Deployment; nil when it does not exist.
	Target *Target
	// Jobs are the experiment's k6 Jobs, by name.
	Jobs map[string]*Job
	// ScriptMissing explains why spec.load.scriptRef cannot be read ("" when it
	// can, or when there is no scriptRef).
	ScriptMissing string
	// Forbidden says which of the experiment's effects its requester may not
	// do themselves ("" when every one is allowed, or nothing was checked).
	Forbidden string
	// InvalidSpec says what in the spec passed admission but cannot run (a
	// query template that misuses a placeholder), or "".
	InvalidSpec string
	// NotAllowed says which Prometheus URL or k6 image the operator's
	// installer does not allow ("" when all are).
	NotAllowed string
	// Samples are the samples taken since the status was last persisted.
	Samples []metrics.Sample
	// LastPendingSample is when the newest of Samples (or SampleFailures) was
	// taken; zero when none is pending.
	LastPendingSample time.Time
	// SampleFailures are sampling attempts that failed (a metrics outage).
	SampleFailures []SampleFailure
	// Live are the running load pods' live counters, read with the sample
	// taken in this reconcile (none when no sample was due).
	Live []LiveLoad
	// Pods are the target pods' states, for the hard-limit guardrails.
	Pods []guardrail.PodState
	// ToggleError is set when the reconciler could not apply the toggle for a
	// reason that retrying will not fix (an admin endpoint answered 4xx/5xx,
	// JAVA_TOOL_OPTIONS comes from a Secret). The engine aborts and reverts.
	ToggleError string
}

// Target is the observed state of the target Deployment.
type Target struct {
	// HeldBy is the lock annotation's value: "namespace/name" of the experiment
	// holding the target, or "".
	HeldBy string
	// HolderGone is true when HeldBy names an experiment that no longer exists.
	HolderGone bool
	// Original is the toggle's original-state record to keep: the annotation's
	// when this experiment already holds the lock, otherwise captured from the
	// live template. Empty when CaptureError is set.
	Original string
	// CaptureError says why the toggle cannot be applied to this target (for
	// example the container does not exist); the experiment stalls on it.
	CaptureError string
	// CaptureReason is the condition reason for CaptureError.
	CaptureReason string
	// MissingLimits names what is missing ("cpu limit", "memory limit"), or "".
	MissingLimits string
	// Rollout is the Deployment's rollout state.
	Rollout Rollout
	// Changed says what someone else changed on a target this experiment
	// holds (its pod template no longer matches the digest written with the
	// experiment's last change), or "".
	Changed string
	// Replicas is the Deployment's desired replica count.
	Replicas int32
	// CPULimitCores and MemoryLimitBytes are the target container's limits.
	CPULimitCores, MemoryLimitBytes float64
}

// SampleFailure is a sampling attempt that failed.
type SampleFailure struct {
	Time    time.Time
	Message string
}

// Rollout summarises a Deployment's rollout.
type Rollout struct {
	// ObservedGeneration is the generation the Deployment controller has seen.
	ObservedGeneration int64
	// Complete is true when the controller has observed the current generation,
	// every replica runs the current template and is available, and no old
	// replica is left.
	Complete bool
	// DeadlineExceeded is true when the Deployment reports
	// ProgressDeadlineExceeded.
	DeadlineExceeded bool
	// Message describes an incomplete rollout, such as "1 of 2 updated replicas available".
	Message string
	// ProgressDeadline is the Deployment's progressDeadlineSeconds.
	ProgressDeadline time.Duration
}

// Job is an observed k6 Job with its pods' state.
type Job struct {
	Name string
	// Started is when the last of its pods started running (the window's load is
	// complete from then on); nil while any pod is still pending.
	Started *time.Time
	// Finished is when the Job completed or failed.
	Finished *time.Time
	Complete bool
	// ResultsPending is true when the Job is complete but not every pod's
	// termination has reached the operator's cache yet (the Job and pod caches
	// are separate informers).
	ResultsPending bool
	Failed         bool
	// FailureMessage says why the Job failed.
	FailureMessage string
	// Results are the parsed results of its pods, once they terminated.
	Results []*k6.PodResult
	// ResultErrors are messages of pods whose results could not be read.
	ResultErrors []string
}

// ActionKind is what the reconciler must do.
type ActionKind string

// The actions, in the order the reconciler runs them within one decision.
const (
	// ActionAcquireLock writes the lock and original-state annotations on the
	// target (one update), before anything is changed.
	ActionAcquireLock ActionKind = "AcquireLock"
	// ActionEnsureScript creates the experiment's k6 script ConfigMap.
	ActionEnsureScript ActionKind = "EnsureScript"
	// ActionApplyToggle applies the toggle to the target.
	ActionApplyToggle ActionKind = "ApplyToggle"
	// ActionRevertToggle restores the target from the original-state record.
	ActionRevertToggle ActionKind = "RevertToggle"
	// ActionCreateJob creates the load Job of Window.
	ActionCreateJob ActionKind = "CreateJob"
	// ActionDeleteJob deletes Job JobName (and its pods, at once).
	ActionDeleteJob ActionKind = "DeleteJob"
	// ActionDeletePods deletes Pods, which the revert could not reach, so their
	// Deployment replaces them with pods that never had the toggle.
	ActionDeletePods ActionKind = "DeletePods"
	// ActionReleaseLock removes the lock and original-state annotations.
	ActionReleaseLock ActionKind = "ReleaseLock"
	// ActionRemoveFinalizer lets a deleted experiment go.
	ActionRemoveFinalizer ActionKind = "RemoveFinalizer"
)

// Action is one thing to do.
type Action struct {
	Kind ActionKind
	// Window is the load window of ActionCreateJob.
	Window k6.Window
	// JobName names the Job of ActionCreateJob and ActionDeleteJob.
	JobName string
	// Original is the record ActionAcquireLock writes and ActionRevertToggle
	// restores.
	Original string
	// Pods are the pods ActionRevertToggle switches back (runtime toggles: the
	// pods the toggle may be on) and ActionDeletePods deletes.
	Pods []string
	// Toggle is the toggle ActionApplyToggle applies, or whose revert
	// ActionRevertToggle runs: spec.toggle, or one of spec.variants' (the
	// one status.toggle.variant names, for a revert).
	Toggle *perfv1.ToggleSpec
}

// Event is a Kubernetes event to record; reasons equal condition reasons.
type Event struct {
	Warning bool
	Reason  string
	Message string
}

// Stall is why a run cannot make progress without help.
type Stall struct {
	Reason  string
	Message string
}

// Decision is what Decide concluded.
type Decision struct {
	// Status is the new status, to persist once every action succeeded.
	Status perfv1.PerfExperimentStatus
	// Actions are to be run in order.
	Actions []Action
	// Events are recorded after the actions succeeded.
	Events []Event
	// Stall is set when the run waits for something only a person can fix.
	Stall *Stall
	// Waiting says what a non-stalled run is waiting for, for the Reconciling
	// condition's message.
	Waiting string
	// WaitReason is the Reconciling condition's reason while waiting, when it
	// is not plain progress (ReasonQueued: another experiment holds the
	// target); empty means ReasonProgressing.
	WaitReason string
	// RequeueAfter is when to look again if no event arrives first; 0 means only
	// events wake the experiment.
	RequeueAfter time.Duration
	// ChangesAt is when the status is next due to change whatever the samples
	// say: the open window's load ends, a settle period or an interleaved
	// slot is over. Zero when nothing is scheduled. The reconciler leaves
	// samples that would be written alone shortly before it to that change's
	// write.
	ChangesAt time.Time
	// RevertOutcome is set when a failing revert was given up:
	// perfv1.ReasonPodsRestarted or perfv1.ReasonRevertAbandoned.
	RevertOutcome string
}
