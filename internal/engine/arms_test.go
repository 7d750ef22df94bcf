package engine

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
)

// gcVariants is story 4's experiment: three JVM collectors against the
// baseline, two stages.
func gcVariants() *perfv1.PerfExperiment {
	e := seedExperiment()
	e.Spec.Toggle = nil
	e.Spec.Stages = e.Spec.Stages[:2]
	for _, gc := range []string{"G1", "Serial", "Parallel"} {
		e.Spec.Variants = append(e.Spec.Variants, perfv1.ArmSpec{Name: strings.ToLower(gc), Toggle: perfv1.ToggleSpec{JVMOption: "-XX:+Use" + gc + "GC"}})
	}
	return e
}

// httpVariants are runtime variants: each has its own switch and switch-back.
func httpVariants() *perfv1.PerfExperiment {
	e := seedExperiment()
	e.Spec.Toggle = nil
	e.Spec.Stages = e.Spec.Stages[:2]
	for _, level := range []string{"low", "high"} {
		e.Spec.Variants = append(e.Spec.Variants, perfv1.ArmSpec{Name: level, Toggle: perfv1.ToggleSpec{HTTP: &perfv1.HTTPToggle{
			HTTPRequest: perfv1.HTTPRequest{Path: "/admin/sampling", Body: level}, Port: 8081,
			Revert: perfv1.HTTPRequest{Path: "/admin/sampling", Body: "off-" + level}}}})
	}
	return e
}

// variantCPU gives each variant its own cost: G1 +10 %, Serial −5 %, Parallel
// ±0 of the 0.40 cores per pod; low +5 %, high +20 %.
func variantCPU(t *perfv1.ToggleSpec) float64 {
	switch {
	case t.JVMOption == "-XX:+UseG1GC":
		return 0.44
	case t.JVMOption == "-XX:+UseSerialGC":
		return 0.38
	case t.JVMOption == "-XX:+UseParallelGC":
		return 0.40
	case t.HTTP != nil && t.HTTP.Body == "low":
		return 0.42
	case t.HTTP != nil && t.HTTP.Body == "high":
		return 0.48
	}
	panic(fmt.Sprintf("unknown toggle %+v", *t))
}

// armWindows prints the windows as "stage/variant[/arm]".
func armWindows(ws []perfv1.WindowStatus) string {
	var parts []string
	for _, w := range ws {
		p := fmt.Sprintf("%d/%s", w.Stage, w.Variant)
		if w.Arm != "" {
			p += "/" + w.Arm
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, " ")
}

func TestVariantsAreMeasuredOneAfterTheOtherAgainstOneBaseline(t *testing.T) {
	for _, tc := range []struct {
		name    string
		exp     *perfv1.PerfExperiment
		windows string
		cpu     map[string]float64 // overhead per variant
	}{
		{"jvmOption variants roll the pods", gcVariants(),
			"-1/warmup 0/baseline " +
				"0/settle/g1 0/treatment/g1 0/settle/g1 0/baseline/g1 0/settle/serial 0/treatment/serial 0/settle/serial 0/baseline/serial 0/settle/parallel 0/treatment/parallel 0/settle/parallel 0/baseline/parallel " +
				"1/settle 1/baseline 1/settle/g1 1/treatment/g1 1/settle/g1 1/baseline/g1 1/settle/serial 1/treatment/serial 1/settle/serial 1/baseline/serial 1/settle/parallel 1/treatment/parallel 1/settle/parallel 1/baseline/parallel",
			map[string]float64{"g1": 0.10, "serial": -0.05, "parallel": 0}},
		{"http variants switch at run time", httpVariants(),
			"-1/warmup 0/baseline 0/settle/low 0/treatment/low 0/settle/low 0/baseline/low 0/settle/high 0/treatment/high 0/settle/high 0/baseline/high " +
				"1/settle 1/baseline 1/settle/low 1/treatment/low 1/settle/low 1/baseline/low 1/settle/high 1/treatment/high 1/settle/high 1/baseline/high",
			map[string]float64{"low": 0.05, "high": 0.20}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, tc.exp)
			w.cpuOf = variantCPU
			// Time in GC: 10 ms/s per pod without a variant, each variant
			// its CPU's share more (G1 +10 % → 11 ms/s).
			w.gcOf = func(t *perfv1.ToggleSpec) float64 {
				if t == nil {
					return 0.010
				}
				return 0.010 * variantCPU(t) / 0.40
			}
			w.runToEnd()
			st := w.exp.Status
			if st.Phase != perfv1.PhaseSucceeded {
				t.Fatalf("phase %s, abort %+v", st.Phase, st.Abort)
			}
			if got := armWindows(st.Windows); got != tc.windows {
				t.Fatalf("windows\n got %s\nwant %s", got, tc.windows)
			}
			arms := len(tc.exp.Spec.Variants)
			if w.applied || w.heldBy != "" || len(w.jobs) != 0 {
				t.Fatalf("left behind: toggle applied %v, lock %q, jobs %v", w.applied, w.heldBy, w.jobs)
			}
			if want := 2 * arms; w.applies != want || w.reverts != want {
				t.Fatalf("applied %d and reverted %d times; want %d and %d (each variant at each stage, reverted before the next)", w.applies, w.reverts, want, want)
			}
			for name, n := range w.created {
				if n != 1 {
					t.Errorf("Job %s created %d times", name, n)
				}
			}
			if len(st.Summary) != 2*arms {
				t.Fatalf("%d summary rows, want %d (one per stage and variant): %+v", len(st.Summary), 2*arms, st.Summary)
			}
			wantConf := 1 - 0.05/float64(arms)
			for i, row := range st.Summary {
				v := tc.exp.Spec.Variants[i%arms].Name
				if row.Variant != v || row.Stage != tc.exp.Spec.StageName(i/arms) {
					t.Errorf("row %d is stage %s variant %q, want stage %s variant %s", i, row.Stage, row.Variant, tc.exp.Spec.StageName(i/arms), v)
				}
				if row.CPU == nil || math.Abs(row.CPU.Overhead-tc.cpu[v]) > 1e-3 || !row.Trustworthy {
					t.Errorf("stage %s variant %s: CPU %+v (want %+.2f) trustworthy %v", row.Stage, row.Variant, row.CPU, tc.cpu[v], row.Trustworthy)
				}
				if row.GC == nil || math.Abs(row.GC.Baseline-0.020) > 1e-9 || math.Abs(row.GC.Overhead-tc.cpu[v]) > 1e-3 {
					t.Errorf("stage %s variant %s: time in GC %+v, want 20 ms/s (two pods) and %+.2f", row.Stage, row.Variant, row.GC, tc.cpu[v])
				}
				if math.Abs(row.Confidence-wantConf) > 1e-12 {
					t.Errorf("stage %s variant %s: confidence %g, want %g (Bonferroni over %d)", row.Stage, row.Variant, row.Confidence, wantConf, arms)
				}
			}
			if !strings.Contains(Outcome(&tc.exp.Spec, &st), fmt.Sprintf("all 2 stages measured with %d variants", arms)) {
				t.Errorf("outcome %q", Outcome(&tc.exp.Spec, &st))
			}
			if st.Toggle.Applied || st.CurrentStage != "" {
				t.Errorf("final status: toggle %+v, stage %q", st.Toggle, st.CurrentStage)
			}
		})
	}
}

// runUntilVariant runs until the run is in phase p with the variant of
// index i.
func (w *world) runUntilVariant(p perfv1.Phase, i int32) {
	at := func() bool {
		st := w.exp.Status
		return st.Phase == p && st.VariantIndex != nil && *st.VariantIndex == i
	}
	for !at() {
		d := w.step()
		if at() {
			return
		}
		if w.exp.Status.Phase.IsTerminal() || !w.advance(d) {
			w.t.Fatalf("never reached %s of variant %d (at %s)", p, i, w.exp.Status.Phase)
		}
	}
}

// A crash may land between the actions and the status write at any decision
// of a run with variants: the run still measures every variant once, applies
// each once per stage (once more at most, see below; never one over another:
// the world fails the test on that), and leaves nothing behind.
func TestVariantRunLosesItsStatusAtAnyDecision(t *testing.T) {
	// Without a settle, one decision reverts a runtime variant and applies
	// the next: the crash between them must not lose which one is on.
	httpNoSettle := func() *perfv1.PerfExperiment {
		e := httpVariants()
		e.Spec.Windows.Settle = "0s"
		return e
	}
	// One stage each: every decision of a stage is lost once, and the test's
	// cost grows with the square of the decisions.
	oneStage := func(mk func() *perfv1.PerfExperiment) func() *perfv1.PerfExperiment {
		return func() *perfv1.PerfExperiment {
			e := mk()
			e.Spec.Stages = e.Spec.Stages[:1]
			return e
		}
	}
	for _, mk := range []func() *perfv1.PerfExperiment{oneStage(gcVariants), oneStage(httpVariants), oneStage(httpNoSettle)} {
		ref := newWorld(t, mk())
		ref.runToEnd()
		arms := len(ref.exp.Spec.Variants)
		for k := 1; k <= ref.decisions; k++ {
			w := newWorld(t, mk())
			w.loseStatusAt = k
			w.runToEnd()
			kind := w.exp.Spec.Switch().Kind()
			if w.exp.Status.Phase != perfv1.PhaseSucceeded {
				t.Fatalf("%s, status lost at decision %d: phase %s (%+v)", kind, k, w.exp.Status.Phase, w.exp.Status.Abort)
			}
			if got, want := armWindows(w.exp.Status.Windows), armWindows(ref.exp.Status.Windows); got != want {
				t.Fatalf("%s, status lost at decision %d: windows %s, want %s", kind, k, got, want)
			}
			// Without a settle, a crash after one decision reverted a variant
			// and applied the next repeats that decision: the next variant is
			// switched back (its intent was recorded) and on again, once more.
			if w.applied || w.heldBy != "" || len(w.jobs) != 0 || w.applies < arms || w.applies > arms+1 {
				t.Fatalf("%s, status lost at decision %d: applied %v lock %q jobs %d applies %d", kind, k, w.applied, w.heldBy, len(w.jobs), w.applies)
			}
			for name, n := range w.created {
				if n != 1 {
					t.Fatalf("%s, status lost at decision %d: Job %s created %d times", kind, k, name, n)
				}
			}
		}
	}
}

// Every ending in the middle of the second variant reverts that variant (for
// a runtime toggle: sends its own switch-back), stops the load and releases
// the target; the summary of an aborted run is not written.
func TestAnEndingDuringAVariantRevertsThatVariant(t *testing.T) {
	for _, tc := range []struct {
		name   string
		exp    func() *perfv1.PerfExperiment
		when   perfv1.Phase
		inject func(w *world)
		reason string
	}{
		{"abort during the second http variant", httpVariants, perfv1.PhaseTreatment, func(w *world) { w.exp.Spec.Abort = true }, perfv1.ReasonAbortRequested},
		{"abort while the second jvmOption variant rolls out", gcVariants, perfv1.PhaseSwitching, func(w *world) { w.exp.Spec.Abort = true }, perfv1.ReasonAbortRequested},
		{"its rollout stuck", gcVariants, perfv1.PhaseSwitching, func(w *world) { w.rolloutStuck = true }, perfv1.ReasonRolloutStuck},
		{"target refuses it", httpVariants, perfv1.PhaseSwitching, func(w *world) { w.toggleError = "pod app-1 answered 500" }, perfv1.ReasonToggleFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, tc.exp())
			w.cpuOf = variantCPU
			w.runUntilVariant(tc.when, 1)
			second := &w.exp.Spec.Variants[1].Toggle
			if tc.when == perfv1.PhaseTreatment && w.active != second {
				t.Fatalf("in the second variant's treatment the world has %+v on", w.active)
			}
			tc.inject(w)
			w.runToEnd() // the world fails the test on a revert of another variant
			st := w.exp.Status
			if st.Abort == nil || st.Abort.Reason != tc.reason {
				t.Fatalf("phase %s abort %+v; want reason %s", st.Phase, st.Abort, tc.reason)
			}
			if w.applied || w.heldBy != "" || len(w.jobs) != 0 || st.Toggle.Applied {
				t.Fatalf("left behind: applied %v lock %q jobs %v status %+v", w.applied, w.heldBy, w.jobs, st.Toggle)
			}
			if st.Toggle.Variant != w.exp.Spec.Variants[1].Name {
				t.Errorf("status.toggle.variant %q, want the second variant", st.Toggle.Variant)
			}
			if len(st.Summary) != 0 {
				t.Errorf("an aborted run has a summary: %+v", st.Summary)
			}
		})
	}
}

// Each variant is compared with the baselines on both sides of it, so a
// drift that is linear over the stage cancels: variants that change nothing
// on a service whose CPU rises 10 % an hour read about 0, where the stage's
// first baseline alone would read the drift (with the seed's 30-minute
// windows: +5 % for the first variant, +26 % for the third).
func TestBracketingBaselinesCancelALinearDrift(t *testing.T) {
	w := newWorld(t, gcVariants())
	w.exp.Spec.Stages = w.exp.Spec.Stages[:1]
	start := w.now
	w.drift = func(now time.Time) float64 { return 1 + 0.10*now.Sub(start).Hours() }
	w.cpuOf = func(*perfv1.ToggleSpec) float64 { return 0.4 } // no variant does anything
	w.runToEnd()
	st := w.exp.Status
	if st.Phase != perfv1.PhaseSucceeded || len(st.Summary) != 3 {
		t.Fatalf("phase %s summary %+v", st.Phase, st.Summary)
	}
	first := w.lastWindowOf(0, perfv1.VariantBaseline, "")
	for _, row := range st.Summary {
		treat := w.lastWindowOf(0, perfv1.VariantTreatment, row.Variant)
		naive := meanCPU(t, treat)/meanCPU(t, first) - 1
		t.Logf("%s: %+.2f %% against its bracket, %+.2f %% against the first baseline alone", row.Variant, 100*row.CPU.Overhead, 100*naive)
		if math.Abs(row.CPU.Overhead) > 0.002 {
			t.Errorf("variant %s: CPU %+.2f %% under a linear drift, want about 0", row.Variant, 100*row.CPU.Overhead)
		}
	}
}

func (w *world) lastWindowOf(stage int32, v perfv1.Variant, arm string) *perfv1.WindowStatus {
	for i := len(w.exp.Status.Windows) - 1; i >= 0; i-- {
		if win := &w.exp.Status.Windows[i]; win.Stage == stage && win.Variant == v && win.Arm == arm {
			return win
		}
	}
	w.t.Fatalf("no %s window of %q at stage %d", v, arm, stage)
	return nil
}

func meanCPU(t *testing.T, w *perfv1.WindowStatus) float64 {
	v, err := w.Series.Values()
	if err != nil || len(v.CPUMillicores) == 0 {
		t.Fatalf("window %+v: %v", w, err)
	}
	sum := 0.0
	for _, c := range v.CPUMillicores {
		sum += float64(c)
	}
	return sum / float64(len(v.CPUMillicores))
}
