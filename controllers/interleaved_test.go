package controllers_test

import (
	"context"
	"reflect"
	"sort"
	"testing"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
)

// TestInterleavedThreeStagesAcrossRestarts runs a three-stage interleaved
// experiment with the operator restarted at every phase change (each settle
// and each sub-window begins with one): the rounds, their order and every
// sub-window are recorded once, each stage ran one load Job, and every pod got
// exactly the switches the recorded orders call for.
func TestInterleavedThreeStagesAcrossRestarts(t *testing.T) {
	d, admin := newHTTPDriver(t, "")
	d.restartOnPhaseChange = true
	dep := d.c.target("app")
	targetPods(t, d.c.ns, dep)
	before := templateJSON(t, d.c.ns, "app")
	e := shortExperiment(d.c.ns, "app", httpToggleSpec())
	e.Spec.Design = perfv1.DesignInterleaved
	e.Spec.Interleaving = &perfv1.InterleavingSpec{Rounds: 2}
	if err := k8s.Create(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	exp := d.until("Succeeded", terminal)
	if exp.Status.Phase != perfv1.PhaseSucceeded {
		t.Fatalf("phase %s: %+v", exp.Status.Phase, exp.Status.Abort)
	}
	if d.restarts < 10 {
		t.Fatalf("only %d restarts over phases %v", d.restarts, d.phases)
	}
	il := exp.Status.Interleaving
	if il == nil || len(il.Rounds) != 6 {
		t.Fatalf("status.interleaving %+v; want 3 stages × 2 rounds", il)
	}
	// The switches every pod must have seen: on at each A→B edge, off at each
	// B→A edge and at a stage's end with the toggle on.
	var want []string
	for s := int32(0); s < 3; s++ {
		on := false
		for _, r := range il.Rounds {
			if r.Stage != s {
				continue
			}
			if r.Order != "AB" && r.Order != "BA" {
				t.Fatalf("round order %q", r.Order)
			}
			for _, c := range r.Order {
				if (c == 'B') != on {
					on = !on
					want = append(want, map[bool]string{true: "on", false: "off"}[on])
				}
			}
			for _, v := range []perfv1.Variant{perfv1.VariantBaseline, perfv1.VariantTreatment} {
				n := 0
				for _, w := range exp.Status.Windows {
					if w.Stage == s && w.Variant == v && w.Round != nil && *w.Round == r.Round {
						n++
						if w.Start == nil || w.End == nil || w.Valid == nil || w.Series == nil {
							t.Errorf("stage %d round %d %s: %+v", s, r.Round, v, w)
						} else if !*w.Valid {
							t.Logf("stage %d round %d %s invalid: %v", s, r.Round, v, w.Invalid)
						}
					}
				}
				if n != 1 {
					t.Errorf("stage %d round %d %s recorded %d times", s, r.Round, v, n)
				}
			}
		}
		if on {
			want = append(want, "off")
		}
	}
	for _, p := range fakePods {
		if got := admin.bodies(p.ip); !reflect.DeepEqual(got, want) {
			t.Errorf("pod %s got %q; the orders %+v call for %q", p.name, got, il.Rounds, want)
		}
	}
	if len(d.c.dupes) > 0 {
		t.Fatalf("Jobs created twice across restarts: %v", d.c.dupes)
	}
	// Every Job the simulated cluster ever ran, by name: the warm-up and one
	// continuous load per stage, nothing per sub-window.
	var names []string
	for name := range d.c.jobUID {
		names = append(names, name)
	}
	sort.Strings(names)
	wantJobs := []string{"overhead-s0-rounds", "overhead-s1-rounds", "overhead-s2-rounds", "overhead-warmup"}
	if !reflect.DeepEqual(names, wantJobs) {
		t.Errorf("load Jobs %v; want %v", names, wantJobs)
	}
	if len(exp.Status.Summary) != 3 {
		t.Fatalf("summary %+v", exp.Status.Summary)
	}
	for _, row := range exp.Status.Summary {
		if row.CPU == nil || row.CPU.Rounds != 2 {
			t.Errorf("stage %s cpu %+v: want a comparison over 2 rounds", row.Stage, row.CPU)
		}
	}
	assertNothingApplied(t, exp)
	d.assertRestored(before, "app")
}
