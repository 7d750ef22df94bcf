package crash

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
)

// TestSoakRandomKills runs experiments with http, exec and env toggles, and
// with two http or env variants, under one
// manager that is killed with SIGKILL at random moments, PERFEXP_SOAK_KILLS
// times (make soak: 60), and restarted each time. Whatever the moments, every
// run must end with no toggle left on (each pod's admin endpoint off, each
// template byte for byte as before), no lock left, and no Job created twice.
// PERFEXP_SOAK_SEED replays a run.
func TestSoakRandomKills(t *testing.T) {
	kills, _ := strconv.Atoi(os.Getenv("PERFEXP_SOAK_KILLS"))
	if kills <= 0 {
		t.Skip("set PERFEXP_SOAK_KILLS (make soak) to run the kill soak")
	}
	seed := time.Now().UnixNano()
	if s := os.Getenv("PERFEXP_SOAK_SEED"); s != "" {
		seed, _ = strconv.ParseInt(s, 10, 64)
	}
	t.Logf("seed %d (PERFEXP_SOAK_SEED replays it)", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))

	ns := newNamespace(t)
	w := startWorld(t, ns)
	const perKind = 4
	kinds := []string{"http", "exec", "env", "http-variants", "env-variants"}
	type run struct {
		name, kind string
		admin      *admin
		before     string
	}
	var runs []*run
	for i := 0; i < len(kinds)*perKind; i++ {
		r := &run{name: fmt.Sprintf("soak-%d", i), kind: kinds[i%len(kinds)]}
		ip := fmt.Sprintf("127.0.0.%d", 100+i)
		if r.kind != "env" && r.kind != "env-variants" {
			r.admin = newAdmin(t, ip)
		}
		targetNamed(t, ns, r.name, ip)
		r.before, _ = templateOf(t, ns, r.name)
		var e *perfv1.PerfExperiment
		switch r.kind {
		case "http-variants":
			e = experiment(ns, perfv1.ToggleSpec{})
			e.Spec.Toggle, e.Spec.Variants = nil, httpVariants()
		case "env-variants":
			e = experiment(ns, perfv1.ToggleSpec{})
			a, b := "a", "b"
			e.Spec.Toggle, e.Spec.Variants = nil, []perfv1.ArmSpec{
				{Name: "a", Toggle: perfv1.ToggleSpec{Env: &perfv1.EnvToggle{Name: "PROFILING", Value: &a}}},
				{Name: "b", Toggle: perfv1.ToggleSpec{Env: &perfv1.EnvToggle{Name: "PROFILING", Value: &b}}}}
		default:
			e = experiment(ns, toggleOf(r.kind))
		}
		e.Name, e.Spec.Target.Deployment = r.name, r.name
		e.Spec.Stages = []perfv1.StageSpec{{QPS: 10}, {QPS: 20}, {QPS: 30}}
		if err := k8s.Create(context.Background(), e); err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
	}

	start := time.Now()
	op := startOperator(t, ns, "", 0)
	for k := 1; k <= kills; k++ {
		time.Sleep(time.Duration(300+rng.IntN(3700)) * time.Millisecond)
		_ = op.cmd.Process.Signal(syscall.SIGKILL)
		<-op.exited
		op = startOperator(t, ns, "", k)
	}
	t.Logf("%d SIGKILLs at random moments over %s", kills, time.Since(start).Round(time.Second))

	outcomes := map[string]int{}
	applied, locks := 0, 0
	for _, r := range runs {
		exp := waitTerminalNamed(t, ns, r.name, 6*time.Minute)
		outcomes[r.kind+" "+string(exp.Status.Phase)]++
		if tg := exp.Status.Toggle; tg != nil && (tg.Applied || len(tg.Pods) > 0) {
			t.Errorf("%s: status.toggle at the end: %+v", r.name, tg)
		}
	}
	time.Sleep(2 * time.Second) // the last reconciles finish their cleanup
	for _, r := range runs {
		after, dep := templateOf(t, ns, r.name)
		if after != r.before {
			applied++
			t.Errorf("%s: template not restored:\nbefore %s\nafter  %s", r.name, r.before, after)
		}
		if r.admin != nil {
			if isOn, got := r.admin.state(); isOn {
				applied++
				t.Errorf("%s: the pod's toggle is still on after %q", r.name, got)
			}
		}
		if dep.Annotations[perfv1.AnnotationLock] != "" {
			locks++
			t.Errorf("%s: lock left: %v", r.name, dep.Annotations)
		}
	}
	w.mu.Lock()
	dupes := slices.Clone(w.dupes)
	w.mu.Unlock()
	if len(dupes) > 0 {
		t.Errorf("Jobs created twice: %v", dupes)
	}
	t.Logf("%d experiments (%d each of %v): toggles left applied %d, locks left %d, duplicate Jobs %d; outcomes %v",
		len(runs), perKind, kinds, applied, locks, len(dupes), outcomes)
}

func waitTerminalNamed(t *testing.T, ns, name string, bound time.Duration) *perfv1.PerfExperiment {
	t.Helper()
	exp := &perfv1.PerfExperiment{}
	for deadline := time.Now().Add(bound); ; time.Sleep(500 * time.Millisecond) {
		if err := k8s.Get(context.Background(), objectKey(ns, name), exp); err == nil && exp.Status.Phase.IsTerminal() {
			return exp
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no ending within %s: phase %s, conditions %+v", name, bound, exp.Status.Phase, exp.Status.Conditions)
		}
	}
}
