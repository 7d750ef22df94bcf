package toggle

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
)

// Ownership of the toggled field. While the toggle is on, the experiment owns the
// toggled variable (or the container's args) and nothing else: Apply sets it from
// the Record and the spec, and Revert sets it back to the Record. A change someone
// else makes to that same variable or to args while the toggle is on is therefore
// overwritten by the revert, because "the target is exactly as before the
// experiment" is the promise and the lock annotation tells others the target is
// held. Every other field, other variables of the same container and other
// containers included, is left as it is found.

// ContainerIndex returns the index of the named container in the template's
// containers; the empty name means the first container. Init containers are not
// candidates: the toggle is about the running application.
func ContainerIndex(tmpl *corev1.PodTemplateSpec, name string) (int, error) {
	cs := tmpl.Spec.Containers
	if name == "" {
		if len(cs) == 0 {
			return -1, errorf(ErrContainerNotFound, "the pod template has no containers")
		}
		return 0, nil
	}
	names := make([]string, len(cs))
	for i := range cs {
		if cs[i].Name == name {
			return i, nil
		}
		names[i] = cs[i].Name
	}
	return -1, errorf(ErrContainerNotFound, "container %q is not in the pod template (it has %s)", name, strings.Join(names, ", "))
}

// Capture records the original state of the field the toggle changes in the given
// container ("" for the first). Call it once per experiment, before the first
// Apply, and keep the result: capturing again after Apply would record the
// toggled state as the original. An http or exec toggle yields a record with nothing to
// restore: only the container is resolved.
//
// It sees only the pod template. A JAVA_TOOL_OPTIONS that comes from envFrom or
// from the image's ENV is invisible here and is overridden, not merged, once the
// toggle creates the variable; likewise, args on a container whose spec has none
// replace the image's CMD. A caller that can read the ConfigMaps or the image may
// refuse those cases before calling Capture.
func Capture(t *perfv1.ToggleSpec, tmpl *corev1.PodTemplateSpec, container string) (Record, error) {
	if err := checkSpec(t); err != nil {
		return Record{}, err
	}
	kind := t.Kind()
	i, err := ContainerIndex(tmpl, container)
	if err != nil {
		return Record{}, err
	}
	c := &tmpl.Spec.Containers[i]
	rec := Record{Version: recordVersion, Kind: kind, Container: c.Name}
	switch kind {
	case KindEnv:
		rec.Env = captureEnv(c, t.Env.Name)
	case KindJVMOption:
		rec.Env = captureEnv(c, JavaToolOptions)
		for _, e := range rec.Env.Entries {
			if e.Var.ValueFrom != nil {
				return Record{}, errorf(ErrNotMergeable,
					"container %q sets %s with valueFrom, so %q cannot be merged into it; set %s with value, or use an env toggle",
					c.Name, JavaToolOptions, t.JVMOption, JavaToolOptions)
			}
		}
	case KindArgs:
		rec.Args = captureArgs(c)
	}
	return rec, nil // KindHTTP, KindExec: nothing in the template to record
}

// Apply puts the toggle on: it sets the toggled variable or args from the record
// and the spec. The result depends only on the record, the spec and the fields
// the toggle does not own, so applying twice is the same as applying once. For an
// http toggle it changes nothing: Sender.Apply switches the pods.
func Apply(t *perfv1.ToggleSpec, tmpl *corev1.PodTemplateSpec, rec Record) error {
	if err := checkMatch(t, rec); err != nil {
		return err
	}
	i, err := ContainerIndex(tmpl, rec.Container)
	if err != nil {
		return err
	}
	c := &tmpl.Spec.Containers[i]
	switch rec.Kind {
	case KindHTTP, KindExec:
		return nil
	case KindArgs:
		c.Args = append(rec.Args.original(), t.Args...)
		return nil
	}
	rest := withoutVar(c.Env, rec.Env.Name)
	if v := appliedVar(t, rec.Env); v != nil {
		// Keep the variable where it was, so the diff a reviewer sees on the
		// Deployment is one changed line; a new variable goes last.
		pos := len(rest)
		if len(rec.Env.Entries) > 0 {
			pos = min(rec.Env.Entries[0].Index, len(rest))
		}
		rest = slices.Insert(rest, pos, *v)
	}
	c.Env = emptyAs(rest, rec.Env.ListNil)
	return nil
}

// Revert restores the toggled field to the record. It needs no spec, so the
// annotation alone is enough after a restart, and it is idempotent: reverting an
// untouched or already reverted template changes nothing. When the recorded
// container is gone nothing of the toggle is left, so Revert does nothing and
// returns nil rather than blocking cleanup forever.
func Revert(tmpl *corev1.PodTemplateSpec, rec Record) error {
	if err := rec.validate(); err != nil {
		return err
	}
	i, err := ContainerIndex(tmpl, rec.Container)
	if err != nil {
		return nil
	}
	c := &tmpl.Spec.Containers[i]
	switch rec.Kind {
	case KindHTTP, KindExec:
		return nil
	case KindArgs:
		c.Args = rec.Args.original()
		return nil
	}
	rest := withoutVar(c.Env, rec.Env.Name)
	// Entries are in ascending index order, so inserting each at its recorded
	// index rebuilds the original list whenever the other entries are unchanged;
	// when they changed, the index is clamped and the entry still comes back.
	for _, e := range rec.Env.Entries {
		rest = slices.Insert(rest, min(e.Index, len(rest)), *e.Var.DeepCopy())
	}
	c.Env = emptyAs(rest, rec.Env.ListNil)
	return nil
}

// appliedVar is the single entry the toggled variable has while the toggle is on,
// or nil when the toggle removes it.
func appliedVar(t *perfv1.ToggleSpec, rec *EnvRecord) *corev1.EnvVar {
	if t.Kind() == KindJVMOption {
		// The JVM uses the last of duplicate entries, so that is the value the
		// option is merged into; Capture refused valueFrom entries.
		cur := ""
		if n := len(rec.Entries); n > 0 {
			cur = rec.Entries[n-1].Var.Value
		}
		return &corev1.EnvVar{Name: JavaToolOptions, Value: mergeOption(cur, t.JVMOption)}
	}
	if t.Env.Remove {
		return nil
	}
	return &corev1.EnvVar{Name: t.Env.Name, Value: *t.Env.Value}
}

// mergeOption appends opt to the options in cur unless cur already holds it as a
// whole word sequence, so "-Xmx1g" is not taken as present in "-Xmx1g2" and
// nothing in cur is ever dropped or reordered.
func mergeOption(cur, opt string) string {
	norm := func(s string) string { return " " + strings.Join(strings.Fields(s), " ") + " " }
	if strings.Contains(norm(cur), norm(opt)) {
		return cur
	}
	if cur == "" {
		return opt
	}
	return cur + " " + opt
}

// withoutVar returns a new list without the entries named name; the caller's
// list is not modified, so the record and the template never share memory.
func withoutVar(env []corev1.EnvVar, name string) []corev1.EnvVar {
	out := make([]corev1.EnvVar, 0, len(env)+1)
	for i := range env {
		if env[i].Name != name {
			out = append(out, env[i])
		}
	}
	return out
}

func varsNamed(env []corev1.EnvVar, name string) []corev1.EnvVar {
	var out []corev1.EnvVar
	for i := range env {
		if env[i].Name == name {
			out = append(out, env[i])
		}
	}
	return out
}

// emptyAs gives an empty list the nil-ness the original list had.
func emptyAs(env []corev1.EnvVar, wasNil bool) []corev1.EnvVar {
	if len(env) > 0 {
		return env
	}
	if wasNil {
		return nil
	}
	return []corev1.EnvVar{}
}

// checkSpec refuses a toggle spec admission should have refused, for objects
// created while the CRD's validation was not installed.
func checkSpec(t *perfv1.ToggleSpec) error {
	n := 0
	for _, set := range []bool{t.Env != nil, t.JVMOption != "", len(t.Args) > 0, t.HTTP != nil, t.Exec != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		return errorf(ErrInvalidSpec, "the toggle sets %d kinds; set exactly one of env, jvmOption, args, http or exec", n)
	}
	switch t.Kind() {
	case KindEnv:
		if t.Env.Name == "" {
			return errorf(ErrInvalidSpec, "the env toggle names no variable")
		}
		if (t.Env.Value != nil) == t.Env.Remove {
			return errorf(ErrInvalidSpec, "the env toggle must set exactly one of value or remove: true")
		}
	case KindJVMOption:
		if strings.TrimSpace(t.JVMOption) == "" {
			return errorf(ErrInvalidSpec, "the jvmOption toggle is blank")
		}
	}
	return nil
}

// checkMatch refuses a record that was not captured for this toggle, such as a
// stale annotation left by an experiment with another toggle.
func checkMatch(t *perfv1.ToggleSpec, rec Record) error {
	if err := rec.validate(); err != nil {
		return err
	}
	if err := checkSpec(t); err != nil {
		return err
	}
	if k := t.Kind(); k != rec.Kind {
		return errorf(ErrInvalidRecord, "the toggle record is for a %s toggle, but the toggle is %q", rec.Kind, k)
	}
	if rec.Kind == KindEnv && rec.Env.Name != t.Env.Name {
		return errorf(ErrInvalidRecord, "the toggle record is for variable %s, but the toggle sets %s", rec.Env.Name, t.Env.Name)
	}
	return nil
}
