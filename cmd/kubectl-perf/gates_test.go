package main

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
	"perfexp.dev/perf-operator/controllers"
	"perfexp.dev/perf-operator/internal/engine"
	"perfexp.dev/perf-operator/internal/testenv"
)

// gateState writes an experiment's status as the controller would: the phase,
// verdict and abort of finishedStatus (or a queued preflight), with the
// conditions from the controller's own setConditions.
func gateState(t *testing.T, ns, name, state string) {
	t.Helper()
	c := cluster(t)
	exp := newExample(t, name)
	exp.Namespace = ns
	if err := c.Create(context.Background(), exp); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	var d engine.Decision
	switch state {
	case "Pass":
		exp.Status = finishedStatus(t0, false)
	case "Fail":
		exp.Status = finishedStatus(t0, false)
		exp.Status.Verdict = perfv1.VerdictFail
	case "Aborted":
		exp.Status = finishedStatus(t0, true)
	case "Queued":
		exp.Status = perfv1.PerfExperimentStatus{Phase: perfv1.PhasePending}
		d = engine.Decision{WaitReason: perfv1.ReasonQueued,
			Waiting: `queued: Deployment "mall-gateway" is held by experiment ` + ns + `/other; this one starts when it ends`}
	case "Stalled":
		exp.Status = perfv1.PerfExperimentStatus{Phase: perfv1.PhasePending}
		d = engine.Decision{Stall: &engine.Stall{Reason: perfv1.ReasonTargetNotFound, Message: `Deployment "mall-gateway" not found`}}
	case "Running":
		exp.Status = perfv1.PerfExperimentStatus{Phase: perfv1.PhaseBaseline, StartTime: &metav1.Time{Time: t0}}
		d = engine.Decision{Waiting: "baseline window of stage 500qps: measuring"}
	default:
		t.Fatalf("unknown state %s", state)
	}
	exp.Status.ObservedGeneration = exp.Generation
	controllers.SetConditions(&exp.Status, exp.Spec.SuccessCriteria, exp.Generation, d, t0)
	if err := c.Status().Update(context.Background(), exp); err != nil {
		t.Fatalf("%s status: %v", name, err)
	}
}

// gateLine is a documented line with its exit code per state.
type gateLine struct {
	line  string
	codes map[string]int
}

// docGates reads docs/gates.md: the exit-code table, and every `kubectl wait`
// or `kubectl perf wait` line of its code blocks, each of which must be in the
// table.
func docGates(t *testing.T) (table map[string]gateLine, states []string, lines []string) {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "docs", "gates.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	table = map[string]gateLine{}
	row := regexp.MustCompile("^\\| `(kubectl (?:perf )?wait [^`]+)` \\|(.*)\\|$")
	code := regexp.MustCompile(`^\s*(\d+)`)
	inBlock := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := sc.Text()
		trimmed := strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(trimmed, "```"):
			inBlock = !inBlock
		case inBlock && (strings.HasPrefix(trimmed, "kubectl wait ") || strings.HasPrefix(trimmed, "kubectl perf wait ")):
			lines = append(lines, trimmed)
		case inBlock && strings.Contains(trimmed, "kubectl wait ") || inBlock && strings.Contains(trimmed, "kubectl perf wait "):
			// `run: kubectl perf wait ...` in a YAML step.
			lines = append(lines, trimmed[strings.Index(trimmed, "kubectl "):])
		case strings.HasPrefix(l, "| Line |"):
			for _, h := range strings.Split(strings.Trim(l, "| "), "|")[1:] {
				states = append(states, strings.TrimSpace(h))
			}
		case row.MatchString(l):
			m := row.FindStringSubmatch(l)
			g := gateLine{line: m[1], codes: map[string]int{}}
			for i, cell := range strings.Split(m[2], "|") {
				c := code.FindStringSubmatch(cell)
				if c == nil || i >= len(states) {
					t.Fatalf("gates.md: row %q: cell %q is not an exit code", m[1], cell)
				}
				g.codes[states[i]], _ = strconv.Atoi(c[1])
			}
			table[g.line] = g
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return table, states, lines
}

var (
	pluginOnce sync.Once
	pluginDir  string
	pluginErr  error
)

// pluginOnPath builds kubectl-perf into a directory for PATH, once.
func pluginOnPath(t *testing.T) string {
	t.Helper()
	pluginOnce.Do(func() {
		if pluginDir, pluginErr = os.MkdirTemp("", "kubectl-perf-bin"); pluginErr != nil {
			return
		}
		out, err := exec.Command("go", "build", "-o", filepath.Join(pluginDir, "kubectl-perf"), ".").CombinedOutput()
		if err != nil {
			pluginErr = errors.New("go build: " + err.Error() + ": " + string(out))
		}
	})
	if pluginErr != nil {
		t.Fatal(pluginErr)
	}
	return pluginDir
}

// Every `kubectl wait` and `kubectl perf wait` line of docs/gates.md, run as
// the recipes run it (sh, the real kubectl, the plugin on the PATH) against a
// real apiserver, exits with the code its table documents for a Pass, Fail,
// Aborted and Queued experiment.
func TestGateRecipes(t *testing.T) {
	table, states, lines := docGates(t)
	if len(lines) < 5 || len(table) == 0 {
		t.Fatalf("gates.md: %d wait lines, %d table rows", len(lines), len(table))
	}
	want := []string{"Pass", "Fail", "Aborted", "Queued"}
	if strings.Join(states, ",") != strings.Join(want, ",") {
		t.Fatalf("gates.md table columns %v; want %v", states, want)
	}
	used := map[string]bool{}
	for _, l := range lines {
		if _, ok := table[l]; !ok {
			t.Errorf("gates.md: %q is in a recipe but not in the exit-code table", l)
		}
		used[l] = true
	}
	for l := range table {
		if !used[l] {
			t.Errorf("gates.md: table line %q is in no recipe", l)
		}
	}
	cluster(t)
	ns := "gates"
	if err := k8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	for _, s := range states {
		gateState(t, ns, "gate-"+strings.ToLower(s), s)
	}
	bin := pluginOnPath(t)
	kubectlBin := filepath.Join(testenv.RepoRoot(), "bin")
	if _, err := os.Stat(filepath.Join(kubectlBin, "kubectl")); err != nil {
		t.Fatalf("bin/kubectl: %v (run hack/tools.sh kube)", err)
	}
	// The documented hours become seconds: a queued run waits until its
	// timeout either way, and the finished ones end at once.
	shorten := regexp.MustCompile(`(--timeout[= ])\d+[hm]`)
	for l, g := range table {
		for _, s := range states {
			t.Run(s+"/"+l, func(t *testing.T) {
				cmd := exec.Command("sh", "-c", shorten.ReplaceAllString(l, "${1}8s"))
				cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "EXPERIMENT=gate-"+strings.ToLower(s), "NAMESPACE="+ns,
					"PATH="+bin+string(os.PathListSeparator)+kubectlBin+string(os.PathListSeparator)+os.Getenv("PATH"))
				out, err := cmd.CombinedOutput()
				got := 0
				var exit *exec.ExitError
				if errors.As(err, &exit) {
					got = exit.ExitCode()
				} else if err != nil {
					t.Fatal(err)
				}
				if got != g.codes[s] {
					t.Errorf("exit %d, documented %d:\n%s", got, g.codes[s], out)
				}
				// kubectl wait's 1 must be an unmet condition (at once with
				// --timeout=0, else at the timeout), never a broken line.
				if got == 1 && !strings.Contains(string(out), "timed out waiting for the condition") &&
					!strings.Contains(string(out), "condition not met") {
					t.Errorf("exit 1 without a timeout:\n%s", out)
				}
			})
		}
	}
}
