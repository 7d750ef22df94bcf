package controllers_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
	"perfexp.dev/perf-operator/internal/testenv"
)

// reportOnFinishedRun runs the kubectl-perf plugin, built from cmd/kubectl-perf,
// against an experiment this controller ran to the end: the table has a row per
// stage and the verdict, -o json carries the stored summary, and --plot writes
// an SVG with the four panels and one toggle marker per applied toggle. The
// plugin's own tests cover the table and plot in detail on hand-made statuses;
// this one proves they read what the controller really writes.
func reportOnFinishedRun(t *testing.T, exp *perfv1.PerfExperiment) {
	t.Helper()
	dir := t.TempDir()
	plugin := filepath.Join(dir, "kubectl-perf")
	if err := testenv.GoBuild(plugin, "./cmd/kubectl-perf"); err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := env.AdminKubeconfig(dir, "report-reader")
	if err != nil {
		t.Fatal(err)
	}
	report := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(plugin, append([]string{"report", exp.Name, "-n", exp.Namespace, "--kubeconfig", kubeconfig}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl perf report %v: %v\n%s", args, err, out)
		}
		return string(out)
	}

	table := report()
	t.Logf("kubectl perf report %s:\n%s", exp.Name, table)
	if len(exp.Status.Summary) == 0 {
		t.Fatal("the finished run has no summary")
	}
	for _, s := range exp.Status.Summary {
		if !strings.Contains(table, s.Stage) {
			t.Errorf("table has no row for stage %q", s.Stage)
		}
	}
	if !strings.Contains(table, string(exp.Status.Phase)) || !strings.Contains(table, string(exp.Status.Verdict)) {
		t.Errorf("table does not show phase %s and verdict %s", exp.Status.Phase, exp.Status.Verdict)
	}

	var js struct {
		Phase  string                `json:"phase"`
		Stages []perfv1.StageSummary `json:"stages"`
	}
	if err := json.Unmarshal([]byte(report("-o", "json")), &js); err != nil {
		t.Fatalf("-o json: %v", err)
	}
	if js.Phase != string(exp.Status.Phase) || len(js.Stages) != len(exp.Status.Summary) {
		t.Errorf("-o json: phase %s with %d stages; status has %s with %d", js.Phase, len(js.Stages), exp.Status.Phase, len(exp.Status.Summary))
	}

	svg := filepath.Join(dir, "run.svg")
	report("--plot", svg)
	b, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	plot := string(b)
	// CPU, memory, p99 (heap only when the target exports it), each window
	// labelled with its stage in every panel, and the overheads per stage.
	panels := 0
	for _, title := range []string{"CPU (cores)", "Memory, working set (MiB)", "p99 latency per window (ms)", "Heap in use (MiB)"} {
		if strings.Contains(plot, ">"+title+"<") {
			panels++
		}
	}
	if panels < 3 {
		t.Errorf("%d panels in the plot; want CPU, memory and p99 at least", panels)
	}
	for i, s := range exp.Status.Summary {
		label := fmt.Sprintf("s%d %dqps treatment", i+1, s.QPS)
		if n := strings.Count(plot, ">"+label+"<"); n != panels {
			t.Errorf("%d labels %q; want one in each of %d panels", n, label, panels)
		}
	}
	if !strings.Contains(plot, ">toggle applied<") || !strings.Contains(plot, ">overhead per stage (%, 95% interval)<") {
		t.Error("the plot has no toggle marker in its legend or no overhead panel")
	}
	t.Logf("plot: %d panels, %d bytes", panels, len(b))
	if dst := os.Getenv("PERF_REPORT_KEEP"); dst != "" {
		_ = os.WriteFile(filepath.Join(dst, exp.Name+".svg"), b, 0o644)
		_ = os.WriteFile(filepath.Join(dst, exp.Name+".txt"), []byte(table), 0o644)
	}
}
