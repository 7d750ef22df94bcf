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
	for _, u := range localDocs(t, filepath.Join("monitoring", "podmonitors.yaml"), ns) {
		if u.GetName() != jvmApp.name {
			continue
		}
		if err := k8s.Create(ctx, u); err != nil {
			t.Fatalf("creating PodMonitor %s: %v", u.GetName(), err)
		}
	}

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
	// experiment with metrics.source: prometheus would sample them.
	pods := podsOf(t, ns, jvmApp)
	target := metrics.Target{Namespace: ns, PodSelector: "app=" + jvmApp.name, Container: "app"}
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
	eventually(t, 3*time.Minute, "the JVM app's CPU, working set and heap through Prometheus", func() (bool, string) {
		sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		samples, err := provider.Sample(sctx, target)
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
