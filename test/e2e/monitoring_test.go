//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
	"perfexp.dev/perf-operator/internal/metrics"
	"perfexp.dev/perf-operator/internal/testenv"
)

// promAPI queries the Prometheus that prometheus-operator runs for the local
// cluster's monitoring stack (hack/monitoring.sh: Prometheus "local" in namespace
// monitoring), through the API server's service proxy to its governing Service
// prometheus-operated, so the test needs no route to the pod network.
type promAPI struct{ cs *kubernetes.Clientset }

// get calls a Prometheus HTTP API path and decodes its data into out; a non-success
// status is an error naming Prometheus' own.
func (p promAPI) get(ctx context.Context, path string, params map[string]string, out any) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	raw, err := p.cs.CoreV1().Services("monitoring").ProxyGet("http", "prometheus-operated", "web", path, params).DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	var resp struct {
		Status, Error string
		Data          json.RawMessage
	}
	if err := json.Unmarshal(raw, &resp); err != nil {
		return fmt.Errorf("%s answered %.200q: %w", path, raw, err)
	}
	if resp.Status != "success" {
		return fmt.Errorf("%s: %s %s", path, resp.Status, resp.Error)
	}
	return json.Unmarshal(resp.Data, out)
}

// sample is one series of an instant vector.
type sample struct {
	Metric map[string]string
	Value  [2]any // [unix seconds, "value"]
}

func (s sample) value() string { v, _ := s.Value[1].(string); return v }

func (p promAPI) query(ctx context.Context, q string) ([]sample, error) {
	var data struct {
		ResultType string
		Result     []sample
	}
	if err := p.get(ctx, "/api/v1/query", map[string]string{"query": q}, &data); err != nil {
		return nil, err
	}
	if data.ResultType != "vector" {
		return nil, fmt.Errorf("%s: a %s, want a vector", q, data.ResultType)
	}
	return data.Result, nil
}

// monitoringUp runs `hack/local.sh up` again with MONITORING=1 (for the cluster of
// the suite): it builds the monitoring images from their pinned modules (minutes
// when cold), installs prometheus-operator and its Prometheus (hack/monitoring.sh
// up, which waits until the Prometheus is Available) and upgrades the operator's
// release with its ServiceMonitor and PrometheusRule enabled. At cleanup the
// release goes back to the suite's values (no monitors) and the stack is removed,
// so later tests measure without a Prometheus scraping beside them.
func monitoringUp(t *testing.T) {
	t.Helper()
	root := testenv.RepoRoot()
	env := append(os.Environ(), "MONITORING=1", "KUBECONFIG="+kubeconfig)
	run := func(name string, args ...string) error {
		cmd := exec.Command(filepath.Join(root, name), args...)
		cmd.Env = env
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		return cmd.Run()
	}
	t.Cleanup(func() {
		helm := exec.Command(filepath.Join(root, "bin", "helm"), "upgrade", "perf-operator",
			filepath.Join(root, "charts", "perf-operator"), "--namespace", "perf-operator-system", "--reuse-values",
			"--set", "monitoring.serviceMonitor.enabled=false", "--set", "monitoring.prometheusRule.enabled=false",
			"--wait", "--timeout", "2m")
		helm.Env = env
		if out, err := helm.CombinedOutput(); err != nil {
			t.Errorf("helm upgrade without the monitors: %v\n%s", err, out)
		}
		if err := run("hack/monitoring.sh", "down"); err != nil {
			t.Errorf("hack/monitoring.sh down: %v", err)
		}
	})
	start := time.Now()
	if err := run("hack/local.sh", "up"); err != nil {
		t.Fatalf("MONITORING=1 hack/local.sh up: %v", err)
	}
	t.Logf("monitoring stack up and the operator's monitors installed in %s", time.Since(start).Round(time.Second))
}

// Issue 15's monitoring story: the chart's ServiceMonitor and PrometheusRule
// reconciled by a real prometheus-operator, the operator's own metrics read
// through the Prometheus it manages, the chart's alert rules loaded and evaluated
// there, and the operator's Prometheus provider sampling a JVM app's CPU, working
// set (the kubelet's) and heap (its PodMonitor's) there with its default queries.
func TestMonitoringStack(t *testing.T) {
	monitoringUp(t)
	cs, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		t.Fatal(err)
	}
	prom := promAPI{cs}
	ctx := t.Context()

	// The JVM app with its PodMonitor (examples/local/monitoring) first, so that
	// prometheus-operator puts it into the same configuration as the chart's
	// ServiceMonitor: each new configuration reaches the Prometheus pod only with
	// the kubelet's next sync of its Secret volume, up to a minute or two later.
	ns := "e2e-monitoring"
	deploy(t, ns, jvmApp)
	createPodMonitor(t, ns, jvmApp)

	// The operator's metrics, scraped over HTTPS with the Prometheus' token (a
	// TokenReview and a SubjectAccessReview on the manager's side) as the chart's
	// ServiceMonitor says: its own series, exported at 0 for every ending from its
	// start, and controller-runtime's.
	for _, q := range []string{
		`up{namespace="perf-operator-system"}`,
		`count(perfexp_experiment_endings_total{namespace="perf-operator-system"})`,
		`controller_runtime_active_workers{namespace="perf-operator-system",controller="perfexperiment"}`,
	} {
		eventually(t, 3*time.Minute, "Prometheus to have "+q, func() (bool, string) {
			v, err := prom.query(ctx, q)
			if err != nil {
				return false, err.Error()
			}
			if len(v) == 0 {
				return false, "no series"
			}
			for _, s := range v {
				if strings.HasPrefix(q, "up") && s.value() != "1" {
					return false, fmt.Sprintf("target %v is down", s.Metric)
				}
			}
			t.Logf("%s: %d series, e.g. %v = %s", q, len(v), v[0].Metric, v[0].value())
			return true, ""
		})
	}

	// The chart's PrometheusRule, loaded from the rule file prometheus-operator
	// wrote for it, with each alert evaluated without error.
	want := []string{"PerfExperimentGuardrailBreached", "PerfExperimentAborted", "PerfOperatorReconcileErrors"}
	eventually(t, 3*time.Minute, "the chart's rules loaded and evaluated", func() (bool, string) {
		var data struct {
			Groups []struct {
				Name, File string
				Rules      []struct{ Name, Health, LastError string }
			}
		}
		if err := prom.get(ctx, "/api/v1/rules", nil, &data); err != nil {
			return false, err.Error()
		}
		for _, g := range data.Groups {
			// prometheus-operator names the file <namespace>-<name>-<uid>.yaml.
			if g.Name != "perf-operator" || !strings.Contains(g.File, "perf-operator-system-perf-operator-") {
				continue
			}
			var got []string
			for _, r := range g.Rules {
				if r.Health != "ok" {
					return false, fmt.Sprintf("rule %s in %s: health %q %s", r.Name, g.File, r.Health, r.LastError)
				}
				got = append(got, r.Name)
			}
			if !slices.Equal(got, want) {
				return false, fmt.Sprintf("group %s in %s has %v, want %v", g.Name, g.File, got, want)
			}
			t.Logf("rule group %s from %s: %v, all evaluated ok", g.Name, g.File, got)
			return true, ""
		}
		return false, fmt.Sprintf("no group perf-operator from the chart's PrometheusRule among %d groups", len(data.Groups))
	})

	// The JVM app's heap through its PodMonitor, and its CPU and working set from
	// the kubelet's resource metrics (the stack's kubelet ServiceMonitor), sampled
	// by the operator's own Prometheus provider with its default queries, as an
	// experiment with metrics.source: prometheus samples them.
	sampledThroughPrometheus(t, ns, jvmApp)
}

// createPodMonitor creates a sample app's PodMonitor from
// examples/local/monitoring/podmonitors.yaml in ns.
func createPodMonitor(t *testing.T, ns string, a app) {
	t.Helper()
	for _, u := range localDocs(t, filepath.Join("monitoring", "podmonitors.yaml"), ns) {
		if u.GetName() != a.name {
			continue
		}
		if err := k8s.Create(t.Context(), u); err != nil {
			t.Fatalf("creating PodMonitor %s: %v", u.GetName(), err)
		}
		return
	}
	t.Fatalf("no PodMonitor %s in examples/local/monitoring/podmonitors.yaml", a.name)
}

// sampledThroughPrometheus waits until the operator's Prometheus provider, with its
// default queries, samples CPU, working set and heap of every pod of the app's
// container "app" from the monitoring stack's Prometheus (through the API
// server's service proxy), and logs the values.
func sampledThroughPrometheus(t *testing.T, ns string, a app) {
	t.Helper()
	pods := podsOf(t, ns, a)
	target := metrics.Target{Namespace: ns, PodSelector: "app=" + a.name, Container: "app"}
	for _, p := range pods {
		target.Pods = append(target.Pods, p.Name)
	}
	rt, err := rest.TransportFor(restConfig)
	if err != nil {
		t.Fatal(err)
	}
	api, err := promapi.NewClient(promapi.Config{
		Address:      restConfig.Host + "/api/v1/namespaces/monitoring/services/prometheus-operated:web/proxy",
		RoundTripper: rt,
	})
	if err != nil {
		t.Fatal(err)
	}
	provider := metrics.NewPrometheus(promv1.NewAPI(api), metrics.DefaultQueries(), metrics.WithInterval(10*time.Second))
	eventually(t, 3*time.Minute, a.name+"'s CPU, working set and heap through Prometheus", func() (bool, string) {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		samples, err := provider.Sample(ctx, target)
		cancel()
		if err != nil {
			return false, err.Error()
		}
		if len(samples) != len(pods) {
			return false, fmt.Sprintf("samples of %d pods, want %d", len(samples), len(pods))
		}
		var missing []string
		for _, s := range samples {
			for _, v := range []struct {
				name  string
				value float64
			}{{"CPU", s.CPUCores}, {"working set", s.WorkingSetBytes}, {"heap", s.HeapBytes}} {
				if math.IsNaN(v.value) || v.value < 0 {
					missing = append(missing, s.Pod+" "+v.name)
				}
			}
		}
		if len(missing) > 0 {
			// Only what is missing: the values change at every poll.
			return false, "no " + strings.Join(missing, ", ")
		}
		for _, s := range samples {
			t.Logf("pod %s: CPU %.4f cores, working set %.1f MiB, heap %.1f MiB", s.Pod, s.CPUCores, s.WorkingSetBytes/(1<<20), s.HeapBytes/(1<<20))
		}
		return true, ""
	})
}

// An experiment measured through the monitoring stack's Prometheus at the URL the
// README names, prometheus-operated.monitoring:9090, which the operator's pod
// resolves through the cluster's DNS: the toy app's profiling switch at one
// stage, with windows long enough for the one-minute range of the CPU query's
// rate (a sample counts only once that range lies inside its window).
func TestMonitoringStackExperiment(t *testing.T) {
	monitoringUp(t)
	ns := "e2e-monitoring-exp"
	deploy(t, ns, toy)
	createPodMonitor(t, ns, toy)
	sampledThroughPrometheus(t, ns, toy)
	before := templateJSON(t, ns, toy)
	exp := experiment(t, "profiling-overhead.yaml", ns, func(e *perfv1.PerfExperiment) {
		short(50)(e)
		e.Spec.Windows = perfv1.WindowsSpec{Baseline: "150s", Treatment: "150s", Settle: "20s"}
		e.Spec.Metrics.Source = perfv1.MetricsSourcePrometheus
		e.Spec.Metrics.Prometheus = &perfv1.PrometheusSpec{URL: "http://prometheus-operated.monitoring:9090"}
	})
	if err := createExperiment(t, exp); err != nil {
		t.Fatal(err)
	}
	done := runUntil(t, client.ObjectKeyFromObject(exp), 12*time.Minute, "the run to end", terminal)
	if done.Status.Phase != perfv1.PhaseSucceeded {
		t.Fatalf("phase %s: %+v", done.Status.Phase, done.Status.Abort)
	}
	if done.Status.MetricsSource != perfv1.MetricsSourcePrometheus {
		t.Errorf("metrics source %q, want prometheus", done.Status.MetricsSource)
	}
	for _, w := range done.Status.Windows {
		if (w.Variant == perfv1.VariantBaseline || w.Variant == perfv1.VariantTreatment) && (w.Valid == nil || !*w.Valid) {
			t.Errorf("window %s of stage %d not valid: %v", w.Variant, w.Stage, w.Invalid)
		}
	}
	if len(done.Status.Summary) != 1 || done.Status.Summary[0].CPU == nil || done.Status.Summary[0].Memory == nil {
		t.Fatalf("summary %+v", done.Status.Summary)
	}
	row := done.Status.Summary[0]
	t.Logf("through Prometheus: CPU %.3f → %.3f cores (%+.1f%% [%+.1f, %+.1f]), memory %+.1f%%",
		row.CPU.Baseline, row.CPU.Treatment, 100*row.CPU.Overhead, 100*row.CPU.CILow, 100*row.CPU.CIHigh, 100*row.Memory.Overhead)
	if row.CPU.Overhead <= 0 {
		t.Errorf("the +20 %% profiling switch measured %+.1f%% CPU through Prometheus", 100*row.CPU.Overhead)
	}
	assertTargetRestored(t, ns, toy, before)
	assertNoJobs(t, ns)
}
