package toggle

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
)

// Target is what a Driver switches: the Deployment's pod template for toggles
// that roll the pods, the listed pods for runtime toggles.
type Target struct {
	// Namespace is the target's namespace (exec runs there).
	Namespace string
	// Record is the original-state record captured before the first change.
	Record Record
	// Template is the Deployment's pod template; template drivers change it in
	// place, and the caller writes it back.
	Template *corev1.PodTemplateSpec
	// Pods are the pods a runtime driver switches.
	Pods []Pod
}

// Driver switches one kind of toggle on and off. Both directions are
// idempotent on a template; on pods they are sent once per call, and the
// caller records which pods may have been switched before calling (see
// runtimeToggle in the controller).
type Driver interface {
	// Apply switches the toggle on. For runtime toggles it returns the pods
	// the toggle may still be on after a failed call (those whose
	// compensating revert failed too).
	Apply(ctx context.Context, t Target) ([]string, error)
	// Revert switches the toggle off and returns all failures joined;
	// FailedPods lists their pods.
	Revert(ctx context.Context, t Target) error
}

// Drivers holds what the runtime drivers send with.
type Drivers struct {
	HTTP Sender
	Exec Execer
}

// For returns the driver of the toggle's kind. An exec toggle with no executor
// is refused here (ErrExecDisabled), before anything is changed.
func (d Drivers) For(t *perfv1.ToggleSpec) (Driver, error) {
	switch t.Kind() {
	case KindHTTP:
		return httpDriver{spec: t.HTTP, s: d.HTTP}, nil
	case KindExec:
		if d.Exec.Executor == nil {
			return nil, ErrExecDisabled
		}
		return execDriver{spec: t.Exec, x: d.Exec}, nil
	case KindEnv, KindJVMOption, KindArgs:
		return templateDriver{spec: t}, nil
	}
	return nil, fmt.Errorf("toggle has no kind: set exactly one of spec.toggle.env, jvmOption, args, http or exec")
}

type templateDriver struct{ spec *perfv1.ToggleSpec }

func (d templateDriver) Apply(_ context.Context, t Target) ([]string, error) {
	return nil, Apply(d.spec, t.Template, t.Record)
}

func (d templateDriver) Revert(_ context.Context, t Target) error {
	return Revert(t.Template, t.Record)
}

type httpDriver struct {
	spec *perfv1.HTTPToggle
	s    Sender
}

func (d httpDriver) Apply(ctx context.Context, t Target) ([]string, error) {
	return d.s.Apply(ctx, d.spec, t.Pods)
}

func (d httpDriver) Revert(ctx context.Context, t Target) error {
	return d.s.Revert(ctx, d.spec, t.Pods)
}

// execDriver runs its commands in the container the record resolved at capture.
type execDriver struct {
	spec *perfv1.ExecToggle
	x    Execer
}

func (d execDriver) Apply(ctx context.Context, t Target) ([]string, error) {
	return d.x.Apply(ctx, d.spec, t.Namespace, t.Record.Container, t.Pods)
}

func (d execDriver) Revert(ctx context.Context, t Target) error {
	return d.x.Revert(ctx, d.spec, t.Namespace, t.Record.Container, t.Pods)
}
