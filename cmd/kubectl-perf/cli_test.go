package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
	"perfexp.dev/perf-operator/internal/testenv"
)

// -o yaml and -o jsonpath print the same report as -o json, through kubectl's
// own printers; an unknown format is refused naming the allowed ones.
func TestReportPrinters(t *testing.T) {
	fixtures(t)
	out, err := kubectl(t, "report", "profiling-overhead", "-n", "default", "-o", "yaml")
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var got reportJSON
	if err := yaml.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	exp := get(t, "profiling-overhead")
	if got.Name != "profiling-overhead" || got.Verdict != exp.Status.Verdict || len(got.Stages) != len(exp.Status.Summary) ||
		!strings.Contains(out, "kind: PerfExperimentReport\n") || !strings.Contains(out, "apiVersion: perfexp.dev/v1alpha1\n") {
		t.Fatalf("-o yaml:\n%s", out)
	}
	out, err = kubectl(t, "report", "profiling-overhead", "-n", "default", "-o", "jsonpath={.verdict} {.stages[*].qps}")
	if err != nil || out != "Pass 500 1000 2000" {
		t.Fatalf("-o jsonpath printed %q, %v", out, err)
	}
	if _, err := kubectl(t, "report", "profiling-overhead", "-n", "default", "-o", "wide"); err == nil ||
		!strings.Contains(err.Error(), "jsonpath") {
		t.Fatalf("-o wide: %v", err)
	}
}

// NAME completes with the namespace's experiments, as kubectl completes its
// own resources; the phase is the description.
func TestCompletionOfExperimentNames(t *testing.T) {
	fixtures(t)
	for _, cmd := range []string{"report", "wait", "abort", "export"} {
		// The word being completed is the last one: the kubeconfig goes first.
		out, err := run(t, "__complete", cmd, "--kubeconfig", kubeconfig, "-n", "default", "profiling-")
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		for _, want := range []string{"profiling-overhead\tSucceeded\n", "profiling-aborted\tAborted\n", ":4\n"} {
			if !strings.Contains(out, want) {
				t.Errorf("__complete %s profiling-: no %q in\n%s", cmd, want, out)
			}
		}
		if strings.Contains(out, "exit-") {
			t.Errorf("__complete %s profiling-: names without the prefix:\n%s", cmd, out)
		}
	}
	// A second argument completes nothing.
	out, _ := run(t, "__complete", "report", "--kubeconfig", kubeconfig, "-n", "default", "profiling-overhead", "")
	if strings.Contains(out, "profiling") {
		t.Errorf("second argument completed:\n%s", out)
	}
}

// The plugin takes kubectl's connection flags, not a subset of them.
func TestKubectlConnectionFlags(t *testing.T) {
	out, err := run(t, "report", "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"--kubeconfig", "--context", "--namespace", "--as", "--token", "--server", "--request-timeout"} {
		if !strings.Contains(out, f) {
			t.Errorf("report --help has no %s", f)
		}
	}
}

// krewPlugin is the part of krew's Plugin (index.krew.googlecontainertools.github.com
// v1alpha2) the manifest must get right.
type krewPlugin struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Version          string `json:"version"`
		Homepage         string `json:"homepage"`
		ShortDescription string `json:"shortDescription"`
		Platforms        []struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			URI    string `json:"uri"`
			Sha256 string `json:"sha256"`
			Files  []struct {
				From string `json:"from"`
				To   string `json:"to"`
			} `json:"files"`
			Bin string `json:"bin"`
		} `json:"platforms"`
	} `json:"spec"`
}

// plugins/perf.yaml parses strictly as a krew Plugin named perf, at the chart's
// version, and every platform installs the kubectl-perf binary from its archive.
func TestKrewManifest(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "plugins", "perf.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var p krewPlugin
	if err := yaml.UnmarshalStrict(raw, &p, yaml.DisallowUnknownFields); err != nil {
		// description and caveats are free text the struct leaves out.
		if !strings.Contains(err.Error(), "description") && !strings.Contains(err.Error(), "caveats") {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(raw, &p); err != nil {
			t.Fatal(err)
		}
	}
	if p.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || p.Kind != "Plugin" || p.Metadata.Name != "perf" {
		t.Fatalf("not a krew Plugin named perf: %s %s %s", p.APIVersion, p.Kind, p.Metadata.Name)
	}
	chart, err := os.ReadFile(filepath.Join("..", "..", "charts", "perf-operator", "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(chart, &c); err != nil || p.Spec.Version != "v"+c.AppVersion {
		t.Errorf("version %s; want v + the chart's appVersion %q (%v)", p.Spec.Version, c.AppVersion, err)
	}
	if p.Spec.ShortDescription == "" || len(p.Spec.ShortDescription) > 80 || p.Spec.Homepage == "" {
		t.Errorf("shortDescription %q, homepage %q", p.Spec.ShortDescription, p.Spec.Homepage)
	}
	want := map[string]bool{"linux/amd64": true, "linux/arm64": true, "darwin/amd64": true, "darwin/arm64": true, "windows/amd64": true}
	hex := regexp.MustCompile(`^[0-9a-f]{64}$`)
	for _, pl := range p.Spec.Platforms {
		goos, arch := pl.Selector.MatchLabels["os"], pl.Selector.MatchLabels["arch"]
		delete(want, goos+"/"+arch)
		bin := "kubectl-perf"
		if goos == "windows" {
			bin += ".exe"
		}
		if pl.Bin != bin || len(pl.Files) == 0 || pl.Files[0].From != bin {
			t.Errorf("%s/%s: bin %q, files %+v; want %s", goos, arch, pl.Bin, pl.Files, bin)
		}
		if !hex.MatchString(pl.Sha256) || !strings.HasSuffix(pl.URI, "kubectl-perf_"+goos+"_"+arch+".tar.gz") ||
			!strings.Contains(pl.URI, "/"+p.Spec.Version+"/") {
			t.Errorf("%s/%s: uri %s, sha256 %q", goos, arch, pl.URI, pl.Sha256)
		}
	}
	if len(want) != 0 {
		t.Errorf("no platform for %v", want)
	}
}

// `kubectl describe` of a finished three-stage experiment does not grow with
// its windows' lengths: each series is one packed line per metric, not a
// number per line, so 240-point windows print as many lines as 20-point ones.
func TestDescribeDoesNotGrowWithTheSeries(t *testing.T) {
	c := cluster(t)
	if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "describe"}}); err != nil {
		t.Fatal(err)
	}
	describe := func(name string) string {
		t.Helper()
		cmd := exec.Command(filepath.Join(testenv.RepoRoot(), "bin", "kubectl"), "describe", "perfexperiment", name, "-n", "describe")
		cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		return string(out)
	}
	gateState(t, "describe", "short-windows", "Pass")
	gateState(t, "describe", "long-windows", "Pass")
	long := &perfv1.PerfExperiment{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "describe", Name: "long-windows"}, long); err != nil {
		t.Fatal(err)
	}
	for i := range long.Status.Windows {
		s := long.Status.Windows[i].Series
		if s == nil {
			continue
		}
		v, err := s.Values()
		if err != nil {
			t.Fatal(err)
		}
		for len(v.CPUMillicores) < perfv1.MaxSeriesPoints {
			v.CPUMillicores = append(v.CPUMillicores, v.CPUMillicores...)[:min(2*len(v.CPUMillicores), perfv1.MaxSeriesPoints)]
			v.MemoryBytes = append(v.MemoryBytes, v.MemoryBytes...)[:len(v.CPUMillicores)]
			v.HeapBytes = append(v.HeapBytes, v.HeapBytes...)[:len(v.CPUMillicores)]
		}
		s.SetValues(v)
	}
	if err := c.Status().Update(context.Background(), long); err != nil {
		t.Fatal(err)
	}
	short, longOut := describe("short-windows"), describe("long-windows")
	ns, nl := strings.Count(short, "\n"), strings.Count(longOut, "\n")
	t.Logf("kubectl describe of a three-stage experiment: %d lines with 20-point windows, %d with 240-point windows", ns, nl)
	if ns != nl || !regexp.MustCompile(`Points:\s+240\n`).MatchString(longOut) {
		t.Errorf("describe grows with the series: %d lines, then %d:\n%s", ns, nl, longOut)
	}
}
