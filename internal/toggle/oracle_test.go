package toggle

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
)

// The round-trip tests' oracles: whether a template shows the toggle on, or
// exactly as recorded. The operator itself never asks (its revert is
// idempotent), so they live with the tests.

// IsApplied reports whether the toggle is in effect in the template: the toggled
// variable or args are what Apply sets. Positions are ignored, so a template
// someone reordered does not cause a second rollout. It is always false for an
// http toggle, which leaves no trace in the template.
func IsApplied(t *perfv1.ToggleSpec, tmpl *corev1.PodTemplateSpec, rec Record) (bool, error) {
	if err := checkMatch(t, rec); err != nil {
		return false, err
	}
	i, err := ContainerIndex(tmpl, rec.Container)
	if err != nil {
		return false, err
	}
	c := &tmpl.Spec.Containers[i]
	switch rec.Kind {
	case KindHTTP, KindExec:
		return false, nil
	case KindArgs:
		return slices.Equal(c.Args, append(rec.Args.original(), t.Args...)), nil
	}
	got := varsNamed(c.Env, rec.Env.Name)
	want := appliedVar(t, rec.Env)
	if want == nil {
		return len(got) == 0, nil
	}
	return len(got) == 1 && equality.Semantic.DeepEqual(got[0], *want), nil
}

// IsReverted reports whether the toggled variable or args are as recorded, that
// is, whether Revert has nothing left to restore. Positions are ignored, as in
// IsApplied; a missing container counts as reverted, as in Revert.
func IsReverted(tmpl *corev1.PodTemplateSpec, rec Record) (bool, error) {
	if err := rec.validate(); err != nil {
		return false, err
	}
	i, err := ContainerIndex(tmpl, rec.Container)
	if err != nil {
		return true, nil
	}
	c := &tmpl.Spec.Containers[i]
	switch rec.Kind {
	case KindHTTP, KindExec:
		return true, nil
	case KindArgs:
		return slices.Equal(c.Args, rec.Args.Original), nil
	}
	got := varsNamed(c.Env, rec.Env.Name)
	if len(got) != len(rec.Env.Entries) {
		return false, nil
	}
	for j := range got {
		if !equality.Semantic.DeepEqual(got[j], rec.Env.Entries[j].Var) {
			return false, nil
		}
	}
	return true, nil
}
