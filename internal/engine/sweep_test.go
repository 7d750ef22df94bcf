package engine

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
	"perfexp.dev/perf-operator/internal/k6"
)

// sweepExperiment is a load-only sweep (no toggle) of the given stages.
func sweepExperiment(stages ...perfv1.StageSpec) *perfv1.PerfExperiment {
	return &perfv1.PerfExperiment{
		ObjectMeta: metav1.ObjectMeta{Name: "sweep", Namespace: "shop"},
		Spec: perfv1.PerfExperimentSpec{
			Target:  perfv1.TargetSpec{Deployment: "mall-gateway", URL: "http://mall-gateway.shop.svc:8080"},
			Load:    perfv1.LoadSpec{Requests: []perfv1.RequestSpec{{Path: "/", Weight: 1}}},
			Warmup:  &perfv1.WarmupSpec{QPS: 50, Duration: "1m"},
			Stages:  stages,
			Windows: perfv1.WindowsSpec{Baseline: "5m"},
			Metrics: perfv1.MetricsSpec{Interval: "1m"},
		},
	}
}

// server answers a window as a target of capacity req/s with one worker per
// 10 ms of latency: below capacity every request is served in 10 ms; past it
// the rate stays at capacity, latency grows and failPct of the requests fail.
func server(capacity float64, failPct float64) func(w k6.Window) *k6.PodResult {
	return func(w k6.Window) *k6.PodResult {
		secs := w.Duration.Seconds()
		asked := float64(w.QPS)
		if w.VUs > 0 {
			asked = float64(w.VUs) * 100 // a user sends one request per 10 ms
		}
		rate, p99, fail := asked, 10.0, 0.0
		if asked > capacity {
			rate, p99, fail = capacity, 10*asked/capacity*4, failPct
		}
		n := int64(rate * secs)
		r := &k6.PodResult{Requests: n, Failures: int64(float64(n) * fail / 100), P50Ms: p99 / 2, P95Ms: p99 * 0.9, P99Ms: p99, MaxMs: p99 * 2, DurationSeconds: secs,
			QPS: w.QPS, VUs: w.VUs}
		if w.QPS > 0 {
			r.Iterations = int64(asked * secs) // k6 counts what it sent, dropped or not
		}
		return r
	}
}

// A load-only sweep measures each stage once, changes nothing on the target,
// reports errors instead of aborting on them, and finds the knee.
func TestLoadOnlySweep(t *testing.T) {
	for _, tc := range []struct {
		name      string
		stages    []perfv1.StageSpec
		windows   string
		kneeStage string
		capacity  float64
		reason    string
	}{
		{"qps", []perfv1.StageSpec{{QPS: 200}, {QPS: 400}, {QPS: 600}, {QPS: 800}},
			"-1/warmup 0/baseline 1/baseline 2/baseline 3/baseline", "800", 700, "achieved 700.0 req/s of the 800.0 asked"},
		{"concurrency", []perfv1.StageSpec{{Concurrency: 1}, {Concurrency: 2}, {Concurrency: 4}, {Concurrency: 8}},
			"-1/warmup 0/baseline 1/baseline 2/baseline 3/baseline", "c8", 700, "of the 800.0 that 8 users reach at stage c4's rate per user"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, sweepExperiment(tc.stages...))
			w.results = server(700, 20)
			// The heap grows all along (the load rises): no growth rule in a sweep.
			start := w.now
			w.heap = func(t time.Time) float64 { return 800<<20 + t.Sub(start).Minutes()*300e6 }
			w.runToEnd()
			st := w.exp.Status
			if st.Phase != perfv1.PhaseSucceeded {
				t.Fatalf("phase %s, abort %+v", st.Phase, st.Abort)
			}
			if got := windowsSummary(st.Windows); got != tc.windows {
				t.Fatalf("windows\n got %s\nwant %s", got, tc.windows)
			}
			if w.toggleActions != 0 || w.generation != 1 || (st.Toggle != nil && (st.Toggle.Applied || st.Toggle.AppliedAt != nil)) {
				t.Errorf("a sweep switched something: %d applies, %d reverts, generation %d, toggle %+v", w.applies, w.reverts, w.generation, st.Toggle)
			}
			if w.heldBy != "" || len(w.jobs) != 0 {
				t.Errorf("left behind: lock %q, jobs %v", w.heldBy, w.jobs)
			}
			if st.Summary != nil || st.Verdict != "" || st.Overhead != nil {
				t.Errorf("a sweep has no overhead: summary %+v verdict %q overhead %+v", st.Summary, st.Verdict, st.Overhead)
			}
			if len(st.Curve) != len(tc.stages) {
				t.Fatalf("curve %+v", st.Curve)
			}
			last := st.Curve[len(st.Curve)-1]
			if last.AchievedQPS != 700 || last.ErrorPercent != 20 || last.CPUCores == nil || *last.CPUCores != 0.8 ||
				last.MemoryBytes == nil || *last.MemoryBytes != 3<<30 || last.CPUPercentOfLimit == nil || *last.CPUPercentOfLimit != 20 {
				t.Errorf("last point %+v", last)
			}
			if first := st.Curve[0]; first.ErrorPercent != 0 || first.P99Ms != 10 || !first.Valid || first.QPS != tc.stages[0].QPS || first.Concurrency != tc.stages[0].Concurrency {
				t.Errorf("first point %+v", first)
			}
			k := st.Knee
			if k == nil || k.Stage != tc.kneeStage || k.Index != 3 || k.CapacityQPS != tc.capacity || !strings.Contains(k.Reason, tc.reason) {
				t.Fatalf("knee %+v", k)
			}
			if msg := Outcome(&w.exp.Spec, &st); !strings.Contains(msg, "knee at stage "+tc.kneeStage) || !strings.Contains(msg, "capacity about 700.0 req/s") {
				t.Errorf("outcome %q", msg)
			}
		})
	}
}

// A sweep that never reaches capacity says so.
func TestLoadOnlySweepWithoutAKnee(t *testing.T) {
	w := newWorld(t, sweepExperiment(perfv1.StageSpec{QPS: 100}, perfv1.StageSpec{QPS: 200}))
	w.results = server(1000, 0)
	w.runToEnd()
	st := w.exp.Status
	if st.Phase != perfv1.PhaseSucceeded || st.Knee != nil || len(st.Curve) != 2 {
		t.Fatalf("phase %s knee %+v curve %+v", st.Phase, st.Knee, st.Curve)
	}
	if msg := Outcome(&w.exp.Spec, &st); !strings.Contains(msg, "no knee: every stage kept up (best 200.0 req/s)") {
		t.Errorf("outcome %q", msg)
	}
}

// A sweep is still stopped by the guardrails that protect the target: here
// the working set reaching the memory limit's 90 %.
func TestLoadOnlySweepStopsAtTheMemoryLimit(t *testing.T) {
	w := newWorld(t, sweepExperiment(perfv1.StageSpec{QPS: 100}, perfv1.StageSpec{QPS: 200}, perfv1.StageSpec{QPS: 400}))
	w.runUntil(perfv1.PhaseBaseline)
	w.workingSet = func(time.Time) float64 {
		if w.exp.Status.StageIndex != nil && *w.exp.Status.StageIndex >= 1 {
			return 3.9 * (1 << 30) // of 4 GiB
		}
		return 1.5 * (1 << 30)
	}
	w.runToEnd()
	st := w.exp.Status
	if st.Phase != perfv1.PhaseAborted || st.Abort == nil || st.Abort.Reason != perfv1.ReasonMemoryLimit {
		t.Fatalf("phase %s abort %+v", st.Phase, st.Abort)
	}
	if w.toggleActions != 0 || w.heldBy != "" || len(w.jobs) != 0 {
		t.Errorf("toggle actions %d lock %q jobs %v", w.toggleActions, w.heldBy, w.jobs)
	}
}

// Every other ending of a sweep — spec.abort, deletion — stops the load and
// releases the target without a single toggle action (there is nothing to
// switch back).
func TestLoadOnlySweepEndingsSendNoToggleAction(t *testing.T) {
	for _, end := range []string{"abort", "delete"} {
		t.Run(end, func(t *testing.T) {
			w := newWorld(t, sweepExperiment(perfv1.StageSpec{QPS: 100}, perfv1.StageSpec{QPS: 200}))
			w.runUntil(perfv1.PhaseBaseline)
			if end == "abort" {
				w.exp.Spec.Abort = true
				w.runToEnd()
				if w.exp.Status.Phase != perfv1.PhaseAborted {
					t.Fatalf("phase %s", w.exp.Status.Phase)
				}
			} else {
				now := metav1.NewTime(w.now)
				w.exp.DeletionTimestamp = &now
				w.step()
				if !w.finalizerRemoved {
					t.Fatal("finalizer kept")
				}
			}
			if w.toggleActions != 0 || w.heldBy != "" || len(w.jobs) != 0 {
				t.Errorf("toggle actions %d lock %q jobs %v", w.toggleActions, w.heldBy, w.jobs)
			}
		})
	}
}

// A toggle's run with several stages gets the curve from its baseline windows.
func TestToggleRunHasTheCurveToo(t *testing.T) {
	w := newWorld(t, seedExperiment())
	w.runToEnd()
	st := w.exp.Status
	if st.Phase != perfv1.PhaseSucceeded || len(st.Curve) != 3 || len(st.Summary) != 3 || st.Knee != nil {
		t.Fatalf("phase %s curve %+v summary rows %d knee %+v", st.Phase, st.Curve, len(st.Summary), st.Knee)
	}
	if st.Curve[2].QPS != 2000 || st.Curve[2].AchievedQPS != 2000 {
		t.Errorf("curve %+v", st.Curve[2])
	}
}
