package controllers_test

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
)

// A load-only sweep on a real apiserver: each stage measured once, the target's
// template never written (its generation moves only with the lock's two
// annotation writes), the curve in status, the conditions of a finished run
// without a verdict, and the target released.
func TestLoadOnlySweepChangesNothingAndWritesTheCurve(t *testing.T) {
	d := newDriver(t)
	dep := d.c.target("app")
	before := templateJSON(t, d.c.ns, "app")
	gen := dep.Generation
	exp := shortExperiment(d.c.ns, "app", envToggle())
	exp.Spec.Toggle = nil
	exp.Spec.Stages = []perfv1.StageSpec{{QPS: 100}, {QPS: 200}, {QPS: 400, Name: "peak"}}
	if err := k8s.Create(context.Background(), exp); err != nil {
		t.Fatal(err)
	}
	exp = d.until("Succeeded", terminal)
	if exp.Status.Phase != perfv1.PhaseSucceeded {
		t.Fatalf("phase %s: %+v", exp.Status.Phase, exp.Status.Abort)
	}
	d.assertRestored(before, "app")
	var got []string
	for _, w := range exp.Status.Windows {
		got = append(got, string(w.Variant))
		if w.Variant == perfv1.VariantBaseline && (w.Load == nil || w.Valid == nil || !*w.Valid) {
			t.Errorf("window of stage %d without valid results: %+v", w.Stage, w)
		}
	}
	if strings.Join(got, " ") != "warmup baseline baseline baseline" {
		t.Fatalf("windows %v: a sweep measures each stage once", got)
	}
	after := &appsv1.Deployment{}
	_ = k8s.Get(context.Background(), client.ObjectKey{Namespace: d.c.ns, Name: "app"}, after)
	if after.Generation != gen+2 {
		t.Fatalf("target generation went %d → %d; want only the lock's 2 annotation writes", gen, after.Generation)
	}
	if len(exp.Status.Curve) != 3 || exp.Status.Curve[2].Stage != "peak" || exp.Status.Curve[2].AchievedQPS != 400 || exp.Status.Knee != nil {
		t.Fatalf("curve %+v knee %+v", exp.Status.Curve, exp.Status.Knee)
	}
	if exp.Status.Summary != nil || exp.Status.Verdict != "" {
		t.Fatalf("a sweep has no overhead: summary %+v verdict %q", exp.Status.Summary, exp.Status.Verdict)
	}
	c := meta.FindStatusCondition(exp.Status.Conditions, perfv1.ConditionComplete)
	if c == nil || c.Status != "True" || !strings.Contains(c.Message, "load-only sweep: all 3 stages measured; no knee: every stage kept up (best 400.0 req/s)") {
		t.Fatalf("Complete %+v", c)
	}
	if r := meta.FindStatusCondition(exp.Status.Conditions, perfv1.ConditionReady); r == nil || r.Status != "True" || !strings.Contains(r.Message, "status.curve is final") {
		t.Fatalf("Ready %+v", r)
	}
	if p := meta.FindStatusCondition(exp.Status.Conditions, perfv1.ConditionPassed); p != nil {
		t.Fatalf("a sweep without criteria has no Passed condition: %+v", p)
	}
	if len(d.c.dupes) > 0 {
		t.Fatalf("Jobs created twice: %v", d.c.dupes)
	}
}
