package controllers

import (
	"reflect"
	"testing"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
)

// What an experiment's requester must be allowed to do, per toggle kind: a
// load-only sweep changes nothing on the target, so it needs only the load's
// rights.
func TestRightsFor(t *testing.T) {
	jobs := Right{Verb: "create", Group: "batch", Resource: "jobs"}
	script := Right{Verb: "get", Resource: "configmaps", Name: "load"}
	v := "on"
	for _, tc := range []struct {
		name     string
		toggle   *perfv1.ToggleSpec
		variants []perfv1.ArmSpec
		script   bool
		want     []Right
	}{
		{"load-only sweep", nil, nil, false, []Right{jobs}},
		{"load-only sweep with a script", nil, nil, true, []Right{jobs, script}},
		{"env toggle", &perfv1.ToggleSpec{Env: &perfv1.EnvToggle{Name: "P", Value: &v}}, nil, false,
			[]Right{jobs, {Verb: "patch", Group: "apps", Resource: "deployments", Name: "app"}}},
		{"http toggle", &perfv1.ToggleSpec{HTTP: &perfv1.HTTPToggle{}, OnRevertFailure: perfv1.RevertFailureRestartPods}, nil, true,
			[]Right{jobs, {Verb: "create", Resource: "pods", Subresource: "proxy"}, {Verb: "delete", Resource: "pods"}, script}},
		{"exec toggle kept on failure", &perfv1.ToggleSpec{Exec: &perfv1.ExecToggle{}, OnRevertFailure: perfv1.RevertFailureKeep}, nil, false,
			[]Right{jobs, {Verb: "create", Resource: "pods", Subresource: "exec"}}},
		{"jvmOption variants", nil, []perfv1.ArmSpec{{Name: "a", Toggle: perfv1.ToggleSpec{JVMOption: "-XX:+UseSerialGC"}}, {Name: "b", Toggle: perfv1.ToggleSpec{JVMOption: "-XX:+UseParallelGC"}}}, false,
			[]Right{jobs, {Verb: "patch", Group: "apps", Resource: "deployments", Name: "app"}}},
		// One variant that restarts pods a revert cannot reach needs the
		// right to delete them, whatever the others say.
		{"http variants, one restarting pods", nil, []perfv1.ArmSpec{
			{Name: "a", Toggle: perfv1.ToggleSpec{HTTP: &perfv1.HTTPToggle{}, OnRevertFailure: perfv1.RevertFailureKeep}},
			{Name: "b", Toggle: perfv1.ToggleSpec{HTTP: &perfv1.HTTPToggle{}, OnRevertFailure: perfv1.RevertFailureRestartPods}}}, false,
			[]Right{jobs, {Verb: "create", Resource: "pods", Subresource: "proxy"}, {Verb: "delete", Resource: "pods"}}},
	} {
		exp := &perfv1.PerfExperiment{Spec: perfv1.PerfExperimentSpec{Target: perfv1.TargetSpec{Deployment: "app"}, Toggle: tc.toggle, Variants: tc.variants}}
		if tc.script {
			exp.Spec.Load.ScriptRef = &perfv1.ScriptRef{Name: "load"}
		}
		if got := rightsFor(exp); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: rights %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
