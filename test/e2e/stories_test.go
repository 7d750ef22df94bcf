//go:build e2e

package e2e

import (
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
)

// Story 3 as the seed report ran it: the three-stage protocol (warm-up, then per
// stage a baseline, the switch flipped at run time, settle, a treatment and the
// switch back off) on the toy app, with criteria its +20 %-of-the-work switch
// meets (30 % CPU, 10 % memory, 50 % p99). Every stage's CPU interval must reach
// the app's own ground truth within 3 points, the verdict must be Pass and the
// CI gate (Passed) True. About 25 minutes: in make e2e-stories, not CI.
func TestProfilingProtocolThreeStages(t *testing.T) {
	ns := "e2e-protocol"
	deploy(t, ns, toy)
	before := templateJSON(t, ns, toy)
	truth0 := groundTruth(t, ns)
	exp := experiment(t, "profiling-overhead.yaml", ns, func(e *perfv1.PerfExperiment) {
		short(50, 75, 100)(e)
		e.Spec.SuccessCriteria = &perfv1.SuccessCriteria{MaxCPUOverhead: "30%", MaxMemoryOverhead: "10%", MaxP99Overhead: "50%"}
	})
	if err := createExperiment(t, exp); err != nil {
		t.Fatal(err)
	}
	done := runUntil(t, client.ObjectKeyFromObject(exp), 40*time.Minute, "the protocol to end", terminal)
	if done.Status.Phase != perfv1.PhaseSucceeded {
		t.Fatalf("phase %s: %+v", done.Status.Phase, done.Status.Abort)
	}
	truth, err := groundTruth(t, ns).overhead(truth0)
	if err != nil {
		t.Fatal(err)
	}
	if len(done.Status.Summary) != 3 {
		t.Fatalf("summary of %d stages: %+v", len(done.Status.Summary), done.Status.Summary)
	}
	const slack = 0.03
	for _, row := range done.Status.Summary {
		cpu := row.CPU
		if cpu == nil || row.Memory == nil || row.P99 == nil {
			t.Fatalf("stage %s: a row is missing: %+v", row.Stage, row)
		}
		t.Logf("stage %s: CPU %+.1f%% [%+.1f, %+.1f] (app %+.1f%%), memory %s, p99 %s, verdict %s",
			row.Stage, 100*cpu.Overhead, 100*cpu.CILow, 100*cpu.CIHigh, 100*truth, describeRow(row.Memory), describeRow(row.P99), row.Verdict)
		if cpu.CIHigh < truth-slack || cpu.CILow > truth+slack {
			t.Errorf("stage %s: the CPU interval [%+.3f, %+.3f] misses the app's %+.3f (±%.2f)", row.Stage, cpu.CILow, cpu.CIHigh, truth, slack)
		}
		if !row.Trustworthy {
			t.Errorf("stage %s not trustworthy", row.Stage)
		}
	}
	if len(done.Status.Curve) != 3 {
		t.Errorf("a three-stage run has a curve of 3 points: %+v", done.Status.Curve)
	}
	assertGate(t, done, perfv1.VerdictPass)
	assertTargetRestored(t, ns, toy, before)
	assertNoJobs(t, ns)
	assertNoRestarts(t, ns, toy)
}
