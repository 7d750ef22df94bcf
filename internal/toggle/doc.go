// Package toggle applies and reverts the change under test on the target.
//
// Pod-template toggles (env, jvmOption, args) are pure functions over a
// corev1.PodTemplateSpec. Capture records the toggled field's original state in
// a Record; Apply and Revert rewrite only that field; Revert needs nothing but
// the Record, so an operator restarted with only the Deployment's
// perfexp.dev/original annotation can still restore the target. After Capture,
// Apply and Revert the template is exactly what it was, down to env order and nil
// versus empty slices.
//
// The contract with the caller:
//
//   - Capture once per experiment, before anything changes, and store
//     Record.Marshal in the annotation (and status.toggle.original) before the
//     first Apply. On every later reconcile, and after a restart, use the stored
//     record (ParseRecord); never capture again while it exists, or the toggled
//     state would be recorded as the original.
//   - Apply and Revert are idempotent and only change the template in memory; the
//     caller writes the Deployment. IsApplied and IsReverted say whether a write
//     is needed, so a reconcile that finds the work done writes nothing.
//   - Errors match sentinels with errors.Is: ErrContainerNotFound,
//     ErrNotMergeable, ErrInvalidSpec, ErrInvalidRecord.
//   - An http or exec toggle is captured too, into a record with nothing to
//     restore but the resolved container, so every kind takes the same
//     preflight; Apply and Revert leave the template alone for it, and Sender
//     or Execer does the work.
//
// Runtime toggles switch the running pods with bounded concurrency: http sends
// a request to each (Sender), exec runs a command in each pod's container
// through pods/exec (Execer). Their Apply compensates a partial failure itself
// and reports the pods it could not switch back.
package toggle
