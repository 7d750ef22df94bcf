package engine

import (
	"math"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
	"perfexp.dev/perf-operator/internal/k6"
)

const self = "shop/profiling-overhead"

func TestThreeStageRunSucceeds(t *testing.T) {
	for _, tc := range []struct {
		name    string
		exp     *perfv1.PerfExperiment
		windows string
	}{
		{"runtime http toggle", seedExperiment(),
			"-1/warmup 0/baseline 0/settle 0/treatment 1/settle 1/baseline 1/settle 1/treatment 2/settle 2/baseline 2/settle 2/treatment"},
		{"env toggle rolls the pods", envExperiment(),
			"-1/warmup 0/baseline 0/settle 0/treatment 1/settle 1/baseline 1/settle 1/treatment 2/settle 2/baseline 2/settle 2/treatment"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, tc.exp)
			start := w.now
			w.runToEnd()
			st := w.exp.Status
			if st.Phase != perfv1.PhaseSucceeded {
				t.Fatalf("phase %s, abort %+v", st.Phase, st.Abort)
			}
			if got := windowsSummary(st.Windows); got != tc.windows {
				t.Fatalf("windows\n got %s\nwant %s", got, tc.windows)
			}
			for _, win := range st.Windows {
				if win.Start == nil || win.End == nil {
					t.Errorf("window %d/%s not closed: %+v", win.Stage, win.Variant, win)
				}
				if win.Variant == perfv1.VariantSettle {
					continue
				}
				if win.Load == nil || win.Valid == nil || !*win.Valid {
					t.Errorf("window %d/%s has no valid results: %+v", win.Stage, win.Variant, win)
					continue
				}
				if got := win.End.Sub(win.Start.Time); got != w.windowLength(win.Variant) {
					t.Errorf("window %d/%s lasted %s", win.Stage, win.Variant, got)
				}
			}
			if w.applied || w.heldBy != "" || len(w.jobs) != 0 {
				t.Fatalf("left behind: toggle applied %v, lock %q, jobs %v", w.applied, w.heldBy, w.jobs)
			}
			if w.applies != 3 || w.reverts != 3 {
				t.Fatalf("toggle applied %d and reverted %d times; want 3 and 3", w.applies, w.reverts)
			}
			for name, n := range w.created {
				if n != 1 {
					t.Errorf("Job %s created %d times", name, n)
				}
			}
			// 5m warm-up + 3 × (30m + 30m) + settle and rollouts: the run ends
			// a little after 3h05m of simulated time, in a bounded number of
			// decisions (wake-ups only on events and deadlines, no polling).
			if took := w.now.Sub(start); took < 185*time.Minute || took > 200*time.Minute {
				t.Errorf("simulated run took %s", took)
			}
			// One decision per sample (every minute here) plus the events.
			if max := int(w.now.Sub(start)/time.Minute) + 80; w.decisions > max {
				t.Errorf("%d decisions for one run (bound %d): the engine polls", w.decisions, max)
			}
			// The simulation's toggle costs 0.40 → 0.42 cores per pod: +5 %.
			if len(st.Summary) != 3 || st.Verdict == "" || st.Overhead == nil {
				t.Fatalf("no summary: %+v verdict %q", st.Summary, st.Verdict)
			}
			for _, row := range st.Summary {
				if row.CPU == nil || math.Abs(row.CPU.Overhead-0.05) > 1e-3 || !row.Trustworthy {
					t.Errorf("stage %s: CPU %+v trustworthy %v", row.Stage, row.CPU, row.Trustworthy)
				}
			}
			if st.CompletionTime == nil || st.StartTime == nil || st.CurrentStage != "" {
				t.Errorf("timestamps or stage not final: %+v", st)
			}
		})
	}
}

func (w *world) windowLength(v perfv1.Variant) time.Duration {
	p, _ := newPlan(&w.exp.Spec, nil)
	switch v {
	case perfv1.VariantWarmup:
		return p.warmup
	case perfv1.VariantBaseline:
		return p.baseline
	}
	return p.treatment
}

// A crash may land between the actions and the status write at any decision.
// Whichever it is, the run ends the same way: no window twice, no Job created
// twice, the toggle applied once per stage and reverted, nothing left behind.
// A sample's CPU averages over a period before its time (metrics-server's
// window, a rate's range). The first samples after a window starts still carry
// the load before it; they must not count as the window's.
func TestSamplesAveragedOverTheWindowStartAreLeftOut(t *testing.T) {
	w := newWorld(t, seedExperiment())
	w.cpuWindow = 90 * time.Second // longer than the 1m sampling interval, as a rate range may be
	w.runToEnd()
	st := w.exp.Status
	if st.Phase != perfv1.PhaseSucceeded {
		t.Fatalf("phase %s, abort %+v", st.Phase, st.Abort)
	}
	for _, win := range st.Windows {
		if win.Variant != perfv1.VariantBaseline && win.Variant != perfv1.VariantTreatment {
			continue
		}
		if win.Series == nil || win.Series.Points < 4 {
			t.Fatalf("window %d/%s kept too few points: %+v", win.Stage, win.Variant, win.Series)
		}
		vals, err := win.Series.Values()
		if err != nil || len(vals.CPUMillicores) != int(win.Series.Points) {
			t.Fatalf("window %d/%s: %d points unpacked for %d, %v", win.Stage, win.Variant, len(vals.CPUMillicores), win.Series.Points, err)
		}
		for _, v := range vals.CPUMillicores {
			if v >= int64(cpuSpike*1000) {
				t.Fatalf("window %d/%s kept a point averaged over its start: %v", win.Stage, win.Variant, vals.CPUMillicores)
			}
		}
	}
}

// The samples a window leaves out on purpose (its first interval, and those
// averaged over its start) are not missing metrics: the shortest windows the CRD
// allows, sampled with a rate range as long as the interval, stay valid.
func TestLeftOutSamplesDoNotInvalidateShortWindows(t *testing.T) {
	exp := seedExperiment()
	exp.Spec.Metrics.Prometheus = &perfv1.PrometheusSpec{URL: "http://prometheus:9090"}
	least, _ := exp.Spec.MinMeasuredWindow(time.Minute) // 7m: 1m lead-in, 1m range, 5 intervals
	exp.Spec.Windows = perfv1.WindowsSpec{Baseline: perfv1.Duration(least.String()), Treatment: perfv1.Duration(least.String()), Settle: "1m"}
	w := newWorld(t, exp)
	w.cpuWindow = time.Minute
	w.runToEnd()
	st := w.exp.Status
	if st.Phase != perfv1.PhaseSucceeded {
		t.Fatalf("phase %s, abort %+v", st.Phase, st.Abort)
	}
	for _, win := range st.Windows {
		if win.Variant != perfv1.VariantBaseline && win.Variant != perfv1.VariantTreatment {
			continue
		}
		if win.Valid == nil || !*win.Valid {
			t.Errorf("window %d/%s flagged invalid: %v", win.Stage, win.Variant, win.Invalid)
		}
	}
}

func TestStatusLostAtAnyDecisionChangesNothing(t *testing.T) {
	for _, mk := range []func() *perfv1.PerfExperiment{seedExperiment, envExperiment} {
		ref := newWorld(t, mk())
		ref.runToEnd()
		for k := 1; k <= ref.decisions; k++ {
			w := newWorld(t, mk())
			w.loseStatusAt = k
			w.runToEnd()
			if w.exp.Status.Phase != perfv1.PhaseSucceeded {
				t.Fatalf("%s, status lost at decision %d: phase %s (%+v)", mk().Spec.Toggle.Kind(), k, w.exp.Status.Phase, w.exp.Status.Abort)
			}
			if got, want := windowsSummary(w.exp.Status.Windows), windowsSummary(ref.exp.Status.Windows); got != want {
				t.Fatalf("status lost at decision %d: windows %s, want %s", k, got, want)
			}
			if w.applied || w.heldBy != "" || len(w.jobs) != 0 || w.applies != 3 {
				t.Fatalf("status lost at decision %d: applied %v lock %q jobs %d applies %d", k, w.applied, w.heldBy, len(w.jobs), w.applies)
			}
			for name, n := range w.created {
				if n != 1 {
					t.Fatalf("status lost at decision %d: Job %s created %d times", k, name, n)
				}
			}
		}
	}
}

func TestPreflightStallsWithoutChangingAnything(t *testing.T) {
	other := "shop/other"
	for _, tc := range []struct {
		name   string
		setup  func(*world, *Observed)
		reason string
		msg    string
	}{
		{"target missing", func(w *world, o *Observed) { o.Target = nil }, perfv1.ReasonTargetNotFound, `Deployment "mall-gateway" not found in namespace "shop"`},
		{"holder gone", func(w *world, o *Observed) { o.Target.HeldBy, o.Target.HolderGone = other, true }, perfv1.ReasonTargetHeld, "no longer exists"},
		{"no limits", func(w *world, o *Observed) { o.Target.MissingLimits = "memory limit" }, perfv1.ReasonTargetMissingLimits, "has no memory limit"},
		{"container missing", func(w *world, o *Observed) {
			o.Target.CaptureError, o.Target.CaptureReason = `container "app" not found`, perfv1.ReasonContainerNotFound
		}, perfv1.ReasonContainerNotFound, `container "app" not found`},
		{"script missing", func(w *world, o *Observed) { o.ScriptMissing = `ConfigMap "load" not found` }, perfv1.ReasonScriptNotFound, `ConfigMap "load"`},
		{"invalid spec", func(w *world, o *Observed) { w.exp.Spec.Stages = nil }, perfv1.ReasonInvalidSpec, "spec.stages"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, seedExperiment())
			o := w.observe()
			tc.setup(w, &o)
			d := Decide(w.exp, o)
			if d.Stall == nil || d.Stall.Reason != tc.reason || !strings.Contains(d.Stall.Message, tc.msg) {
				t.Fatalf("stall %+v; want reason %s with %q", d.Stall, tc.reason, tc.msg)
			}
			if len(d.Actions) != 0 || d.Status.Phase != perfv1.PhasePending || d.Status.StartTime != nil {
				t.Fatalf("a stalled preflight acted: %+v, phase %s", d.Actions, d.Status.Phase)
			}
		})
	}
}

// A target held by another experiment queues this one: a wait with reason
// Queued naming the holder, nothing changed, never a stall.
func TestPreflightQueuesBehindTheHolder(t *testing.T) {
	w := newWorld(t, seedExperiment())
	o := w.observe()
	o.Target.HeldBy = "shop/other"
	d := Decide(w.exp, o)
	if d.Stall != nil || d.WaitReason != perfv1.ReasonQueued || !strings.Contains(d.Waiting, "held by experiment shop/other") {
		t.Fatalf("want a Queued wait naming shop/other, got stall %+v, wait %s %q", d.Stall, d.WaitReason, d.Waiting)
	}
	if len(d.Actions) != 0 || d.Status.Phase != perfv1.PhasePending || d.Status.StartTime != nil {
		t.Fatalf("a queued preflight acted: %+v, phase %s", d.Actions, d.Status.Phase)
	}
}

func TestPreflightWaitsForAnOngoingRollout(t *testing.T) {
	w := newWorld(t, seedExperiment())
	w.rolloutAt = w.now.Add(time.Minute)
	d := Decide(w.exp, w.observe())
	if d.Stall != nil || len(d.Actions) != 0 || !strings.Contains(d.Waiting, "rollout") {
		t.Fatalf("want a quiet wait on the rollout, got %+v", d)
	}
}

// abortCase runs the experiment until cond holds, then injects a failure.
type abortCase struct {
	name   string
	exp    func() *perfv1.PerfExperiment
	when   perfv1.Phase
	inject func(*world)
	phase  perfv1.Phase
	reason string
	msg    string
}

func TestEveryFailurePathRevertsStopsAndReleases(t *testing.T) {
	cases := []abortCase{
		{"abort during treatment", seedExperiment, perfv1.PhaseTreatment, func(w *world) { w.exp.Spec.Abort = true },
			perfv1.PhaseAborted, perfv1.ReasonAbortRequested, "spec.abort"},
		{"abort during warm-up", seedExperiment, perfv1.PhaseWarmingUp, func(w *world) { w.exp.Spec.Abort = true },
			perfv1.PhaseAborted, perfv1.ReasonAbortRequested, "spec.abort"},
		{"runaway heap after the toggle", seedExperiment, perfv1.PhaseTreatment, func(w *world) {
			onset := w.now
			w.heap = func(t time.Time) float64 { return 800<<20 + t.Sub(onset).Minutes()*700e6 }
		}, perfv1.PhaseAborted, perfv1.ReasonHeapGrowth, "MiB/min"},
		{"rollout stuck past its deadline", envExperiment, perfv1.PhaseSwitching, func(w *world) { w.rolloutStuck = true },
			perfv1.PhaseAborted, perfv1.ReasonRolloutStuck, "did not complete within 10m"},
		{"load Job fails", seedExperiment, perfv1.PhaseBaseline, func(w *world) {
			w.results = func(k6.Window) *k6.PodResult { return nil }
		}, perfv1.PhaseFailed, perfv1.ReasonLoadFailed, "without readable results"},
		{"error rate over the guardrail", seedExperiment, perfv1.PhaseTreatment, func(w *world) {
			w.results = func(win k6.Window) *k6.PodResult {
				n := int64(float64(win.QPS) * win.Duration.Seconds())
				return &k6.PodResult{Requests: n, Failures: n / 10, P50Ms: 2, P95Ms: 5, P99Ms: 9}
			}
		}, perfv1.PhaseAborted, perfv1.ReasonErrorRate, "error rate 10.00%"},
		{"target deleted", seedExperiment, perfv1.PhaseBaseline, func(w *world) { w.targetExists = false },
			perfv1.PhaseFailed, perfv1.ReasonTargetNotFound, "was deleted"},
		{"toggle refused by the target", seedExperiment, perfv1.PhaseSwitching, func(w *world) {
			w.toggleError = "pod mall-gateway-1 answered 500"
		}, perfv1.PhaseAborted, perfv1.ReasonToggleFailed, "answered 500"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, tc.exp())
			w.runUntil(tc.when)
			tc.inject(w)
			w.runToEnd()
			st := w.exp.Status
			if st.Phase != tc.phase || st.Abort == nil || st.Abort.Reason != tc.reason || !strings.Contains(st.Abort.Message, tc.msg) {
				t.Fatalf("phase %s abort %+v; want %s %s %q", st.Phase, st.Abort, tc.phase, tc.reason, tc.msg)
			}
			if tc.reason != perfv1.ReasonTargetNotFound && (w.applied || w.heldBy != "") {
				t.Fatalf("left behind: applied %v lock %q", w.applied, w.heldBy)
			}
			if len(w.jobs) != 0 {
				t.Fatalf("load still running: %v", w.jobs)
			}
			if st.Toggle != nil && st.Toggle.Applied {
				t.Fatal("status says the toggle is still applied")
			}
			for _, win := range st.Windows {
				if win.End == nil {
					t.Fatalf("window %d/%s left open", win.Stage, win.Variant)
				}
			}
		})
	}
}

// Growth before the first toggle is the target's own behaviour, not the
// toggle's: the guardrails watch from the first toggle on.
func TestGrowthBeforeTheToggleIsIgnored(t *testing.T) {
	w := newWorld(t, seedExperiment())
	w.runUntil(perfv1.PhaseBaseline)
	onset := w.now
	w.heap = func(t time.Time) float64 { return 800<<20 + t.Sub(onset).Minutes()*700e6 }
	w.runUntil(perfv1.PhaseSwitching)
	if w.exp.Status.Phase != perfv1.PhaseSwitching || w.exp.Status.Abort != nil {
		t.Fatalf("phase %s abort %+v", w.exp.Status.Phase, w.exp.Status.Abort)
	}
}

func TestDeletionMidRunRevertsStopsReleasesThenLetsGo(t *testing.T) {
	w := newWorld(t, envExperiment())
	w.runUntil(perfv1.PhaseSwitching)
	now := metav1.NewTime(w.now)
	w.exp.DeletionTimestamp = &now
	w.step()
	if w.applied || w.heldBy != "" || len(w.jobs) != 0 || !w.finalizerRemoved {
		t.Fatalf("after deletion: applied %v lock %q jobs %d finalizer removed %v", w.applied, w.heldBy, len(w.jobs), w.finalizerRemoved)
	}
}

// Deleting an experiment that never got the target must not touch it.
func TestDeletionOfAStalledExperimentLeavesTheHolderAlone(t *testing.T) {
	w := newWorld(t, seedExperiment())
	w.heldBy = "shop/other"
	now := metav1.NewTime(w.now)
	w.exp.DeletionTimestamp = &now
	d := w.step()
	for _, a := range d.Actions {
		if a.Kind != ActionRemoveFinalizer {
			t.Fatalf("acted on a target it does not hold: %+v", a)
		}
	}
	if w.heldBy != "shop/other" {
		t.Fatal("released another experiment's lock")
	}
}

func TestInvalidWindowIsFlaggedNotDropped(t *testing.T) {
	w := newWorld(t, seedExperiment())
	w.results = func(win k6.Window) *k6.PodResult {
		n := int64(float64(win.QPS) * win.Duration.Seconds() * 0.97)
		return &k6.PodResult{Requests: n, DroppedIterations: 31, P50Ms: 2, P95Ms: 5, P99Ms: 9}
	}
	w.runToEnd()
	if w.exp.Status.Phase != perfv1.PhaseSucceeded {
		t.Fatalf("phase %s", w.exp.Status.Phase)
	}
	b := w.exp.Status.Windows[1]
	if b.Valid == nil || *b.Valid || len(b.Invalid) == 0 {
		t.Fatalf("window not flagged: %+v", b)
	}
}

func TestAJobHiddenByCacheLagIsNotCreatedTwice(t *testing.T) {
	w := newWorld(t, seedExperiment())
	d := w.step() // preflight: creates the warm-up Job
	hidden := w.jobs
	w.jobs = map[string]*simJob{}
	w.now = w.now.Add(d.RequeueAfter)
	d = w.step()
	if strings.Contains(d.Waiting, "appear") == false || len(d.Actions) != 0 {
		t.Fatalf("want a short wait for the cache, got %+v", d)
	}
	w.jobs = hidden
	w.runToEnd()
	for name, n := range w.created {
		if n != 1 {
			t.Fatalf("Job %s created %d times", name, n)
		}
	}
}

// runUntil reconciles until the experiment is in phase p.
func (w *world) runUntil(p perfv1.Phase) {
	for w.exp.Status.Phase != p {
		d := w.step()
		if w.exp.Status.Phase == p {
			return
		}
		if w.exp.Status.Phase.IsTerminal() || !w.advance(d) {
			w.t.Fatalf("never reached %s (at %s)", p, w.exp.Status.Phase)
		}
	}
}

// The Job cache may show a Job complete before the pod cache shows its pods'
// results; the engine waits briefly, and fails clearly if they never come.
func TestResultsNotYetInTheCache(t *testing.T) {
	w := newWorld(t, seedExperiment())
	w.runUntil(perfv1.PhaseWarmingUp)
	w.now = w.now.Add(6 * time.Minute)
	o := w.observe()
	for _, j := range o.Jobs {
		j.Results, j.ResultsPending = nil, true
	}
	d := Decide(w.exp, o)
	if d.Status.Phase != perfv1.PhaseWarmingUp || d.RequeueAfter != CacheLag {
		t.Fatalf("want a short wait for the pod cache, got phase %s requeue %s", d.Status.Phase, d.RequeueAfter)
	}
	w.now = w.now.Add(MissingJobTimeout)
	o = w.observe()
	for _, j := range o.Jobs {
		j.Results, j.ResultsPending = nil, true
	}
	d = Decide(w.exp, o)
	if d.Status.Phase != perfv1.PhaseFailed || !strings.Contains(d.Status.Abort.Message, "results are gone") {
		t.Fatalf("phase %s abort %+v", d.Status.Phase, d.Status.Abort)
	}
}

// A Job that runs past its window never makes the engine spin: it looks again
// after JobGrace, and gives up after Overdue.
func TestAnOverdueJobIsNeverPolledInATightLoop(t *testing.T) {
	w := newWorld(t, seedExperiment())
	w.runUntil(perfv1.PhaseWarmingUp)
	w.podStart = 0
	hang := func() Observed {
		o := w.observe()
		for _, j := range o.Jobs {
			j.Complete, j.Results, j.Finished = false, nil, nil
		}
		return o
	}
	w.now = w.now.Add(5*time.Minute + JobGrace + time.Second)
	if d := Decide(w.exp, hang()); d.RequeueAfter < JobGrace {
		t.Fatalf("requeue after %s while overdue: a tight loop", d.RequeueAfter)
	}
	w.now = w.now.Add(Overdue)
	if d := Decide(w.exp, hang()); d.Status.Phase != perfv1.PhaseFailed {
		t.Fatalf("phase %s; want Failed after %s overdue", d.Status.Phase, Overdue)
	}
}

// While a window's load runs, the decision says when the status changes next
// (its load ends), so the reconciler can leave samples to that write.
func TestARunningWindowSaysWhenItEnds(t *testing.T) {
	w := newWorld(t, seedExperiment())
	dur, err := w.exp.Spec.Windows.Baseline.Parse()
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for !w.exp.Status.Phase.IsTerminal() {
		d := w.step()
		open := w.exp.Status.Windows
		if n := len(open); n > 0 && open[n-1].Start != nil && open[n-1].End == nil && open[n-1].Variant == perfv1.VariantBaseline {
			end := open[n-1].Start.Add(dur)
			if w.now.Before(end) {
				if !d.ChangesAt.Equal(end) {
					t.Fatalf("at %s in a baseline window ending %s: ChangesAt %s", w.now, end, d.ChangesAt)
				}
				seen++
			}
		}
		if !w.advance(d) {
			break
		}
	}
	if seen == 0 {
		t.Fatal("never saw a running baseline window")
	}
}
