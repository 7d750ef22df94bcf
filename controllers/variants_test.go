package controllers_test

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
)

// Variants roll out one after the other on a real API server, each from the
// original template and back before the next, with the operator restarted at
// every phase boundary: in each variant's treatment window the template
// carries that variant's value and no other, the run ends with one summary
// row per variant, and the template is restored byte for byte.
func TestVariantsRollOneAfterTheOtherAndRestoreTheTarget(t *testing.T) {
	d := newDriver(t)
	d.restartOnPhaseChange = true
	dep := d.c.target("app")
	before := templateJSON(t, d.c.ns, "app")
	gen := dep.Generation
	e := shortExperiment(d.c.ns, "app", envToggle())
	e.Spec.Toggle = nil
	e.Spec.Stages = e.Spec.Stages[:1]
	low, high := "low", "high"
	e.Spec.Variants = []perfv1.ArmSpec{
		{Name: "low", Toggle: perfv1.ToggleSpec{Env: &perfv1.EnvToggle{Name: "PROFILING", Value: &low}}},
		{Name: "high", Toggle: perfv1.ToggleSpec{Env: &perfv1.EnvToggle{Name: "PROFILING", Value: &high}}},
	}
	if err := k8s.Create(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{} // variant → PROFILING in the template during its treatment
	exp := d.until("Succeeded", func(x *perfv1.PerfExperiment) bool {
		if x.Status.Phase == perfv1.PhaseTreatment && x.Status.VariantIndex != nil {
			v := e.Spec.Variants[*x.Status.VariantIndex].Name
			cur := &appsv1.Deployment{}
			err := k8s.Get(context.Background(), client.ObjectKey{Namespace: d.c.ns, Name: "app"}, cur)
			// The operator may have moved on between the two reads: judge
			// the template only when the experiment did not change meanwhile.
			if again := d.c.experiment(d.name); err == nil && again.ResourceVersion == x.ResourceVersion {
				var vals []string
				for _, ev := range cur.Spec.Template.Spec.Containers[0].Env {
					if ev.Name == "PROFILING" {
						vals = append(vals, ev.Value)
					}
				}
				if len(vals) != 1 {
					t.Errorf("variant %s's window: PROFILING entries %v", v, vals)
				} else {
					seen[v] = vals[0]
				}
			}
		}
		return terminal(x)
	})
	if exp.Status.Phase != perfv1.PhaseSucceeded {
		t.Fatalf("phase %s: %+v", exp.Status.Phase, exp.Status.Abort)
	}
	if seen["low"] != "low" || seen["high"] != "high" {
		t.Fatalf("template during the variants' windows: %v", seen)
	}
	d.assertRestored(before, "app")
	if len(exp.Status.Summary) != 2 || exp.Status.Summary[0].Variant != "low" || exp.Status.Summary[1].Variant != "high" {
		t.Fatalf("summary %+v", exp.Status.Summary)
	}
	for _, row := range exp.Status.Summary {
		if row.Confidence != 0.975 {
			t.Errorf("variant %s: confidence %g, want 0.975 (Bonferroni over 2)", row.Variant, row.Confidence)
		}
	}
	// Two applies and two reverts (one template change each) and the lock's
	// two annotation writes: nothing applied twice across the restarts.
	dep = &appsv1.Deployment{}
	_ = k8s.Get(context.Background(), client.ObjectKey{Namespace: d.c.ns, Name: "app"}, dep)
	if dep.Generation != gen+6 {
		t.Fatalf("target generation went %d → %d; want 4 template changes and the lock's 2", gen, dep.Generation)
	}
	if len(d.c.dupes) > 0 {
		t.Fatalf("Jobs created twice: %v", d.c.dupes)
	}
	if d.restarts < 6 {
		t.Fatalf("only %d restarts over phases %v", d.restarts, d.phases)
	}
}
