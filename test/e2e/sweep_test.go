//go:build e2e

package e2e

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
)

// Story 2 on the local cluster: a load-only sweep of the toy app must place its
// knee at the capacity the app's own CPU limit and per-request cost predict,
// within ±25 %, and change nothing on the target. The prediction comes from the
// app's counters over the sweep (CPU seconds and requests, profiling off all
// along): capacity = the pods' CPU limits / CPU per request.
func TestSweepsFindTheToysCapacity(t *testing.T) {
	for _, tc := range []struct{ name, file string }{
		{"qps", "toy-qps-sweep.yaml"},
		{"concurrency", "toy-concurrency-sweep.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := "e2e-sweep-" + tc.name
			deploy(t, ns, toy)
			before := templateJSON(t, ns, toy)
			truthBefore := groundTruth(t, ns)
			exp := experiment(t, tc.file, ns, nil)
			if exp.Spec.Toggle != nil {
				t.Fatalf("%s is not a load-only sweep", tc.file)
			}
			if err := createExperiment(t, exp); err != nil {
				t.Fatal(err)
			}
			done := runUntil(t, client.ObjectKeyFromObject(exp), 10*time.Minute, "the sweep to end", terminal)
			if done.Status.Phase != perfv1.PhaseSucceeded {
				t.Fatalf("phase %s: %+v", done.Status.Phase, done.Status.Abort)
			}
			truth := groundTruth(t, ns)
			cpu, reqs := truth.cpuOff-truthBefore.cpuOff, truth.reqOff-truthBefore.reqOff
			if cpu <= 0 || reqs <= 0 || truth.reqOn != truthBefore.reqOn {
				t.Fatalf("the app's counters moved by %g CPU s over %g requests (profiling on: %g → %g)", cpu, reqs, truthBefore.reqOn, truth.reqOn)
			}
			pods := podsOf(t, ns, toy)
			var limit float64
			for _, p := range pods {
				for _, c := range p.Spec.Containers {
					if c.Name == "app" {
						limit += c.Resources.Limits.Cpu().AsApproximateFloat64()
					}
				}
			}
			predicted := limit / (cpu / reqs)
			var rows []string
			for _, p := range done.Status.Curve {
				rows = append(rows, fmt.Sprintf("%s %.1f req/s p99 %.1f ms errors %.1f %%", p.Stage, p.AchievedQPS, p.P99Ms, p.ErrorPercent))
			}
			t.Logf("curve: %s", strings.Join(rows, "; "))
			t.Logf("app: %.2f ms of CPU per request over %.0f requests, %d pods with %.2f cores of limits: capacity %.1f req/s", 1000*cpu/reqs, reqs, len(pods), limit, predicted)
			k := done.Status.Knee
			if k == nil {
				t.Fatalf("no knee; curve %+v", done.Status.Curve)
			}
			t.Logf("knee: stage %s, capacity %.1f req/s (%+.1f %% of the app's): %s", k.Stage, k.CapacityQPS, 100*(k.CapacityQPS/predicted-1), k.Reason)
			if math.Abs(k.CapacityQPS/predicted-1) > 0.25 {
				t.Errorf("capacity %.1f req/s is more than 25 %% from the app's %.1f", k.CapacityQPS, predicted)
			}
			if k.Index < 1 {
				t.Errorf("knee at the first stage %s: the sweep starts below capacity", k.Stage)
			}
			if len(done.Status.Curve) != len(exp.Spec.Stages) || done.Status.Summary != nil || done.Status.Verdict != "" {
				t.Errorf("curve of %d points for %d stages, summary %+v, verdict %q", len(done.Status.Curve), len(exp.Spec.Stages), done.Status.Summary, done.Status.Verdict)
			}
			for _, w := range done.Status.Windows {
				if w.Variant != perfv1.VariantWarmup && w.Variant != perfv1.VariantBaseline {
					t.Errorf("a sweep ran a %s window", w.Variant)
				}
			}
			assertTargetRestored(t, ns, toy, before)
			assertNoJobs(t, ns)
			assertNoRestarts(t, ns, toy)
		})
	}
}
