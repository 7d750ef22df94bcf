//go:build e2e

package e2e

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
	"perfexp.dev/perf-operator/internal/toggle"
)

// The JVM examples (examples/local/jvm*.yaml) on the JVM sample app: OpenJDK 17
// on a Debian root built with debootstrap (hack/jvm-rootfs.sh).

// shortJVM fits a JVM example to the suite: a warm-up long enough for the JIT,
// one stage, windows of 120 s at a 10 s interval (the JVM scenarios check
// mechanisms and report what they measure; the toy scenarios, with longer
// windows, check the measured value).
func shortJVM(e *perfv1.PerfExperiment) {
	e.Spec.Warmup = &perfv1.WarmupSpec{QPS: 25, Duration: "40s"}
	e.Spec.Stages = []perfv1.StageSpec{{QPS: 50}}
	e.Spec.Windows.Baseline, e.Spec.Windows.Treatment = "120s", "120s"
	e.Spec.Metrics.Interval = "10s"
}

// jcmd runs jcmd against PID 1 in a pod's app container through pods/exec, the
// way the exec toggle does, and returns what it printed.
func jcmd(t *testing.T, ns, pod string, args ...string) string {
	t.Helper()
	cs, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		t.Fatal(err)
	}
	x := toggle.RemoteExecutor{Config: restConfig, Client: cs.CoreV1().RESTClient()}
	// Separate buffers: the two streams are copied by two goroutines.
	var out, errOut bytes.Buffer
	if err := x.Exec(t.Context(), ns, pod, "app", append([]string{"jcmd", "1"}, args...), &out, &errOut); err != nil {
		t.Fatalf("jcmd 1 %s in %s: %v\n%s%s", strings.Join(args, " "), pod, err, out.String(), errOut.String())
	}
	return out.String()
}

// A flight recording started and stopped with jcmd through an exec toggle: it
// runs in every pod during the treatment window and in none after, and the
// summary reports CPU, memory and latency overheads with intervals.
func TestJVMProfilingExecToggle(t *testing.T) {
	ns := "e2e-jvm-profiling"
	deploy(t, ns, jvmApp)
	before := templateJSON(t, ns, jvmApp)
	exp := experiment(t, "jvm-profiling.yaml", ns, shortJVM)
	if err := createExperiment(t, exp); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(exp)
	runUntil(t, key, 6*time.Minute, "the treatment window", func(e *perfv1.PerfExperiment) bool {
		return e.Status.Phase == perfv1.PhaseTreatment
	})
	for _, p := range podsOf(t, ns, jvmApp) {
		if out := jcmd(t, ns, p.Name, "JFR.check"); !strings.Contains(out, "name=perfexp") {
			t.Errorf("pod %s in the treatment window runs no recording perfexp:\n%s", p.Name, out)
		}
	}
	done := runUntil(t, key, 6*time.Minute, "the run to end", terminal)
	if done.Status.Phase != perfv1.PhaseSucceeded {
		t.Fatalf("phase %s: %+v", done.Status.Phase, done.Status.Abort)
	}
	s := done.Status.Summary
	if len(s) != 1 || s[0].CPU == nil || s[0].Memory == nil || s[0].P99 == nil {
		t.Fatalf("summary %+v", s)
	}
	cpu, mem := s[0].CPU, s[0].Memory
	t.Logf("JFR (settings=profile) at 50 qps: CPU %+.1f%% [%+.1f, %+.1f]; memory %+.1f%% [%+.1f, %+.1f]; p99 %+.1f%%; verdict %s",
		100*cpu.Overhead, 100*cpu.CILow, 100*cpu.CIHigh, 100*mem.Overhead, 100*mem.CILow, 100*mem.CIHigh,
		100*s[0].P99.Overhead, done.Status.Verdict)
	for _, o := range []*perfv1.MetricComparison{cpu, mem} {
		if !(o.CILow <= o.Overhead && o.Overhead <= o.CIHigh) {
			t.Errorf("overhead %+.3f outside its interval [%+.3f, %+.3f]", o.Overhead, o.CILow, o.CIHigh)
		}
	}
	for _, p := range podsOf(t, ns, jvmApp) {
		if out := jcmd(t, ns, p.Name, "JFR.check"); strings.Contains(out, "name=perfexp") {
			t.Errorf("pod %s still records after the run:\n%s", p.Name, out)
		}
	}
	assertNoRestarts(t, ns, jvmApp)
	assertTargetRestored(t, ns, jvmApp, before)
	assertNoJobs(t, ns)
}

// Memory tracking switched on under load on a real JVM: the guardrail aborts
// and reverts before the container's limit; no pod is OOM-killed or restarted.
func TestJVMDeathSpiralIsAbortedBeforeTheLimit(t *testing.T) {
	ns := "e2e-jvm-spiral"
	deploy(t, ns, jvmApp)
	before := templateJSON(t, ns, jvmApp)
	exp := experiment(t, "jvm-death-spiral.yaml", ns, func(e *perfv1.PerfExperiment) {
		shortJVM(e)
		e.Spec.Stages = []perfv1.StageSpec{{QPS: 40}}
		e.Spec.Windows = perfv1.WindowsSpec{Baseline: "100s", Treatment: "8m", Settle: "0s"}
		// With a short baseline the growth rule has too little history; the
		// hard limit must stop the leak, at half the container's limit.
		e.Spec.Guardrails.Heap.MaxUtilization = "50%"
	})
	if err := createExperiment(t, exp); err != nil {
		t.Fatal(err)
	}
	assertSpiralStopped(t, ns, jvmApp, before, exp)
}

// A GC choice as a jvmOption: the pods roll with -XX:+UseSerialGC merged into
// JAVA_TOOL_OPTIONS (the -Xmx there kept), memory is measured under load after
// the settle time, and the pods roll back.
// Story 4 as its user asked it: G1, Serial and Parallel GC in one
// experiment, each rolled out, measured against the JVM's own choice and
// rolled back before the next. Every variant's working-set difference comes
// with its (Bonferroni-corrected) interval, and Serial's footprint is below
// G1's, as in the seed (99 vs 82 MB).
func TestJVMGCChoiceVariants(t *testing.T) {
	ns := "e2e-jvm-gc"
	deploy(t, ns, jvmApp)
	before := templateJSON(t, ns, jvmApp)
	exp := experiment(t, "jvm-gc-choice.yaml", ns, func(e *perfv1.PerfExperiment) {
		shortJVM(e)
		e.Spec.Windows.Settle = "40s"
	})
	if err := createExperiment(t, exp); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(exp)
	// In each variant's treatment window its collector runs, merged into the
	// JAVA_TOOL_OPTIONS the app already has, and no other variant's.
	for i, v := range exp.Spec.Variants {
		runUntil(t, key, 10*time.Minute, "the treatment window of variant "+v.Name, func(e *perfv1.PerfExperiment) bool {
			return e.Status.Phase == perfv1.PhaseTreatment && e.Status.VariantIndex != nil && *e.Status.VariantIndex == int32(i)
		})
		for _, p := range podsOf(t, ns, jvmApp) {
			want := "-Xms64m -Xmx256m -XX:ActiveProcessorCount=1 " + v.Toggle.JVMOption
			if !hasEnv(p, "JAVA_TOOL_OPTIONS", want) {
				t.Errorf("pod %s in variant %s's window: JAVA_TOOL_OPTIONS is not %q: %+v", p.Name, v.Name, want, p.Spec.Containers[0].Env)
			}
			if out := jcmd(t, ns, p.Name, "VM.flags"); !strings.Contains(out, v.Toggle.JVMOption) {
				t.Errorf("pod %s does not run %s in variant %s's window:\n%s", p.Name, v.Toggle.JVMOption, v.Name, out)
			}
		}
	}
	done := runUntil(t, key, 10*time.Minute, "the run to end", terminal)
	if done.Status.Phase != perfv1.PhaseSucceeded {
		t.Fatalf("phase %s: %+v", done.Status.Phase, done.Status.Abort)
	}
	rows := map[string]perfv1.StageSummary{}
	for _, r := range done.Status.Summary {
		rows[r.Variant] = r
	}
	if len(done.Status.Summary) != 3 || len(rows) != 3 {
		t.Fatalf("want one summary row per variant, got %+v", done.Status.Summary)
	}
	for _, v := range []string{"g1", "serial", "parallel"} {
		r := rows[v]
		if r.Memory == nil || r.CPU == nil || !r.Trustworthy {
			t.Fatalf("variant %s: %+v", v, r)
		}
		if r.Confidence < 0.983 || r.Confidence > 0.984 || !(r.Memory.CILow <= r.Memory.Overhead && r.Memory.Overhead <= r.Memory.CIHigh) {
			t.Errorf("variant %s: confidence %g, memory %+v", v, r.Confidence, *r.Memory)
		}
		t.Logf("%-8s vs the JVM's choice at 50 qps: working set %.0f → %.0f MiB, %+.1f%% [%+.1f, %+.1f] (%.1f%% CI); CPU %+.1f%% [%+.1f, %+.1f]; p99 %+.1f%%",
			v, r.Memory.Baseline/(1<<20), r.Memory.Treatment/(1<<20), 100*r.Memory.Overhead, 100*r.Memory.CILow, 100*r.Memory.CIHigh, 100*r.Confidence,
			100*r.CPU.Overhead, 100*r.CPU.CILow, 100*r.CPU.CIHigh, 100*r.P99.Overhead)
	}
	if g1, serial := rows["g1"].Memory.Treatment, rows["serial"].Memory.Treatment; serial >= g1 {
		t.Errorf("Serial's working set %.0f MiB is not below G1's %.0f MiB", serial/(1<<20), g1/(1<<20))
	}
	assertTargetRestored(t, ns, jvmApp, before)
	assertNoJobs(t, ns)
}
