package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
)

// Help and usage say what users type: `kubectl perf`, never kubectl-perf.
func TestHelpSaysKubectlPerf(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"report", "--help"}, {"wait", "--help"}, {"export", "--help"}, {"abort", "--help"}, {"guard", "--help"}, {"version", "--help"}} {
		out, err := run(t, args...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		want := "kubectl perf"
		if len(args) > 1 {
			want += " " + args[0]
		}
		if !strings.Contains(out, "Usage:\n  "+want) {
			t.Errorf("%v: usage does not start with %q:\n%s", args, want, out)
		}
		if strings.Contains(out, "kubectl-perf ") {
			t.Errorf("%v: help says kubectl-perf:\n%s", args, out)
		}
	}
	// An unknown command's error names it as typed, too.
	if _, err := run(t, "nope"); err == nil || !strings.Contains(err.Error(), `"kubectl perf"`) {
		t.Errorf("unknown command: %v", err)
	}
}

func TestVersion(t *testing.T) {
	out, err := run(t, "version")
	if err != nil || !strings.HasPrefix(out, "kubectl-perf ") || !strings.Contains(out, "go1.") {
		t.Fatalf("version printed %q, %v", out, err)
	}
	version = "v9.9.9"
	defer func() { version = "" }()
	if out, _ := run(t, "version"); !strings.HasPrefix(out, "kubectl-perf v9.9.9 (") {
		t.Fatalf("version set at build time: printed %q", out)
	}
}

func TestExitStatus(t *testing.T) {
	if code, msg := exitStatus(nil); code != 0 || msg != "" {
		t.Errorf("nil: %d %q", code, msg)
	}
	if code, msg := exitStatus(os.ErrNotExist); code != ExitError || msg != "error: file does not exist" {
		t.Errorf("plain error: %d %q", code, msg)
	}
	if code, msg := exitStatus(&exitError{code: ExitFail, msg: "x"}); code != ExitFail || msg != "x" {
		t.Errorf("outcome: %d %q", code, msg)
	}
}

// A finished run is refused with a message naming its outcome and a non-zero
// exit, and its spec stays as it was.
func TestAbortRefusesAFinishedRun(t *testing.T) {
	fixtures(t)
	for name, want := range map[string]string{
		"profiling-overhead": "perfexperiment default/profiling-overhead has already ended (phase Succeeded, verdict Pass): nothing to abort",
		"profiling-aborted":  "perfexperiment default/profiling-aborted has already ended (phase Aborted, verdict Inconclusive, ",
	} {
		out, err := kubectl(t, "abort", name, "-n", "default")
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("abort %s: want an error starting %q, got %v: %s", name, want, err, out)
		}
		if code, _ := exitStatus(err); code == 0 {
			t.Errorf("abort %s exits 0", name)
		}
		if get(t, name).Spec.Abort {
			t.Errorf("abort %s set spec.abort on a finished run", name)
		}
	}
	// Asked twice, a running experiment is told so, not patched again.
	c := cluster(t)
	exp := newExample(t, "abort-twice")
	if err := c.Create(context.Background(), exp); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"abort requested", "abort already requested; the operator is stopping it"} {
		out, err := kubectl(t, "abort", "abort-twice", "-n", "default")
		if err != nil || out != "perfexperiment default/abort-twice: "+want+"\n" {
			t.Errorf("abort: %q %v, want %q", out, err, want)
		}
	}
}

// report --exit-code: 0 on Pass, a distinct code for each bad outcome, and the
// report is printed all the same.
func TestReportExitCode(t *testing.T) {
	fixtures(t)
	c := cluster(t)
	t0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	for name, edit := range map[string]func(*perfv1.PerfExperimentStatus){
		"exit-fail":         func(st *perfv1.PerfExperimentStatus) { st.Verdict = perfv1.VerdictFail },
		"exit-inconclusive": func(st *perfv1.PerfExperimentStatus) { st.Verdict = perfv1.VerdictInconclusive },
		"exit-noeffect":     func(st *perfv1.PerfExperimentStatus) { st.Verdict = perfv1.VerdictNoEffect },
		"exit-failed": func(st *perfv1.PerfExperimentStatus) {
			st.Phase, st.Verdict = perfv1.PhaseFailed, perfv1.VerdictInconclusive
			st.Abort = &perfv1.AbortStatus{Reason: perfv1.ReasonLoadFailed, Message: "load Job failed", At: *st.CompletionTime}
		},
		"exit-running": func(st *perfv1.PerfExperimentStatus) {
			st.Phase, st.Verdict, st.CompletionTime = perfv1.PhaseTreatment, "", nil
		},
	} {
		exp := newExample(t, name)
		if err := c.Create(context.Background(), exp); err != nil {
			t.Fatal(err)
		}
		exp.Status = finishedStatus(t0, false)
		edit(&exp.Status)
		if err := c.Status().Update(context.Background(), exp); err != nil {
			t.Fatalf("%s status: %v", name, err)
		}
	}
	for _, tc := range []struct {
		name string
		code int
	}{
		{"profiling-overhead", ExitOK},
		{"exit-noeffect", ExitOK},
		{"exit-fail", ExitFail},
		{"exit-inconclusive", ExitInconclusive},
		{"profiling-aborted", ExitAborted},
		{"exit-failed", ExitFailed},
		{"exit-running", ExitNotFinished},
	} {
		for _, output := range []string{"table", "json"} {
			out, err := kubectl(t, "report", tc.name, "-n", "default", "-o", output, "--exit-code")
			if code, msg := exitStatus(err); code != tc.code {
				t.Errorf("report %s -o %s --exit-code: exit %d (%s), want %d", tc.name, output, code, msg, tc.code)
			}
			if !strings.Contains(out, tc.name) {
				t.Errorf("report %s -o %s --exit-code printed no report: %q", tc.name, output, out)
			}
			// Without the flag only errors fail.
			if _, err := kubectl(t, "report", tc.name, "-n", "default", "-o", output); err != nil {
				t.Errorf("report %s without --exit-code: %v", tc.name, err)
			}
		}
	}
	// The codes are distinct, and none is 1 (any error).
	seen := map[int]bool{}
	for _, c := range []int{ExitFail, ExitInconclusive, ExitAborted, ExitFailed, ExitNotFinished} {
		if c == ExitOK || c == ExitError || seen[c] {
			t.Errorf("exit code %d is not distinct", c)
		}
		seen[c] = true
	}
	// A run with no results yet: running, so 6 with the flag, an error without.
	exp := newExample(t, "exit-pending")
	if err := c.Create(context.Background(), exp); err != nil {
		t.Fatal(err)
	}
	exp.Status.Phase = perfv1.PhaseWarmingUp
	exp.Status.StartTime = ptr.To(exp.CreationTimestamp)
	if err := c.Status().Update(context.Background(), exp); err != nil {
		t.Fatal(err)
	}
	_, err := kubectl(t, "report", "exit-pending", "-n", "default", "--exit-code")
	if code, msg := exitStatus(err); code != ExitNotFinished {
		t.Errorf("report of a warming-up run --exit-code: exit %d (%s), want %d", code, msg, ExitNotFinished)
	}
}

// guard -f replays every PerfExperiment of a multi-document file, one line
// each, and --exit-code exits 4 when one would have aborted.
func TestGuardMultiDocumentAndExitCode(t *testing.T) {
	example, err := os.ReadFile(filepath.Join("..", "..", "examples", "death-spiral.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	second := strings.Replace(string(example), "name: memory-tracking", "name: memory-tracking-2", 1)
	if second == string(example) {
		t.Fatal("examples/death-spiral.yaml is not named memory-tracking")
	}
	manifest := filepath.Join(t.TempDir(), "multi.yaml")
	multi := "# The target and two experiments.\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: cf}\n---\n" +
		string(example) + "\n---\n" + second + "\n---\n"
	if err := os.WriteFile(manifest, []byte(multi), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		leakAt float64
		code   int
	}{{"leak", 1200, ExitAborted}, {"healthy", -1, ExitOK}} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := run(t, "guard", "--trace", writeTrace(t, 40, tc.leakAt), "--toggle-at", "1200", "-f", manifest, "--exit-code")
			if code, msg := exitStatus(err); code != tc.code {
				t.Errorf("exit %d (%s), want %d", code, msg, tc.code)
			}
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if len(lines) != 2 || !strings.Contains(lines[0], `"experiment":"`) || !strings.Contains(lines[1], `"experiment":"cfusion/memory-tracking-2"`) {
				t.Errorf("want one line per experiment, named:\n%s", out)
			}
		})
	}
	none := filepath.Join(t.TempDir(), "none.yaml")
	_ = os.WriteFile(none, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n---\nkind: Service\n"), 0o600)
	if _, err := run(t, "guard", "--trace", writeTrace(t, 5, -1), "--toggle-at", "0", "-f", none); err == nil ||
		!strings.Contains(err.Error(), "no PerfExperiment among its documents (kinds: ConfigMap, Service)") {
		t.Errorf("a file without experiments: %v", err)
	}
}
