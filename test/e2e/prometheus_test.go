//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/model"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
	"perfexp.dev/perf-operator/internal/metrics"
	"perfexp.dev/perf-operator/internal/testenv"
)

// nodeIP is the local cluster's node address on its pod bridge (hack/cluster.sh's
// NODE_IP): the host answers there to the pods, the kubelet serves its metrics
// there, and a server bound to it is reachable from the pods and nothing outside
// the machine.
const nodeIP = "10.244.0.1"

// startPrometheus runs a real Prometheus (testenv.PrometheusBinaries: Debian's
// package, installed by hack/prometheus.sh when missing) on the node's bridge
// address, scraping every 5 s the JVM app's pods (/metrics on the admin port
// 8081, labelled with their namespace, pod and container the way
// kube-prometheus-stack's pod monitors label them) and the kubelet's resource
// metrics (/metrics/resource: container_cpu_usage_seconds_total and
// container_memory_working_set_bytes per container, the names of the
// operator's default queries) with the cluster admin's client certificate, as
// kube-prometheus-stack's kubelet ServiceMonitor does with its token. The
// kubelet's cAdvisor endpoint would not do here: cAdvisor does not find the
// local cluster's containerd (its socket is not at the default path), so it
// labels pod cgroups only, without containers. It returns the URL the operator
// in the cluster queries; the server is stopped at cleanup.
func startPrometheus(t *testing.T, ns string, a app, container string) string {
	t.Helper()
	root := testenv.RepoRoot()
	bin, _, err := testenv.PrometheusBinaries(t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", nodeIP+":0")
	if err != nil {
		t.Fatalf("no port on the node address %s: %v", nodeIP, err)
	}
	addr := l.Addr().String()
	_ = l.Close()

	pods := podsOf(t, ns, a)
	var targets strings.Builder
	for _, p := range pods {
		fmt.Fprintf(&targets, "      - targets: ['%s:8081']\n        labels: {namespace: %s, pod: %s, container: %s}\n",
			p.Status.PodIP, ns, p.Name, container)
	}
	pki := filepath.Join(root, ".state", "cluster", "pki")
	cfg := fmt.Sprintf(`global: {scrape_interval: 5s, scrape_timeout: 4s}
scrape_configs:
  - job_name: pods
    static_configs:
%s  - job_name: kubelet-resource
    scheme: https
    metrics_path: /metrics/resource
    tls_config: {ca_file: %s, cert_file: %s, key_file: %s, insecure_skip_verify: true}
    static_configs:
      - targets: ['%s:10250']
`, targets.String(), filepath.Join(pki, "ca.crt"), filepath.Join(pki, "admin.crt"), filepath.Join(pki, "admin.key"), nodeIP)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr,
		"--storage.tsdb.retention.time=2h")
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("prometheus log (last 4 KiB):\n%s", tail(log.String(), 4096))
		}
	})
	url := "http://" + addr
	api, err := metrics.NewPrometheusAPI(url)
	if err != nil {
		t.Fatal(err)
	}
	// Both jobs up with a heap and a working set for every pod, before the
	// experiment's preflight asks.
	eventually(t, 2*time.Minute, "Prometheus scraping the pods and the kubelet", func() (bool, string) {
		for _, q := range []string{
			fmt.Sprintf(`count(jvm_memory_used_bytes{area="heap",namespace=%q})`, ns),
			fmt.Sprintf(`count(container_memory_working_set_bytes{namespace=%q,container=%q})`, ns, container),
		} {
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			v, _, err := api.Query(ctx, q, time.Now())
			cancel()
			if err != nil {
				return false, q + ": " + err.Error()
			}
			if vec, ok := v.(model.Vector); !ok || len(vec) != 1 || int(vec[0].Value) != len(pods) {
				return false, fmt.Sprintf("%s: %v, want %d", q, v, len(pods))
			}
		}
		return true, ""
	})
	return url
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

// Field story 1 as the issue asks for it: the JVM death spiral with the heap
// read from a real Prometheus scraping the app, the example's long baseline (the
// growth rule learns each pod's heap after GC) and its 70 % hard limit left as
// the backstop. The growth rule, not the hard limit, must abort it, and the
// abort must revert the switch on every pod.
func TestJVMDeathSpiralHeapFromPrometheus(t *testing.T) {
	ns := "e2e-jvm-prom"
	deploy(t, ns, jvmApp)
	before := templateJSON(t, ns, jvmApp)
	url := startPrometheus(t, ns, jvmApp, "app")
	exp := experiment(t, "jvm-death-spiral.yaml", ns, func(e *perfv1.PerfExperiment) {
		e.Spec.Metrics.Source = perfv1.MetricsSourcePrometheus
		e.Spec.Metrics.Prometheus = &perfv1.PrometheusSpec{URL: url}
	})
	if err := createExperiment(t, exp); err != nil {
		t.Fatal(err)
	}
	done := assertSpiralStopped(t, ns, jvmApp, before, exp)
	if done.Status.MetricsSource != perfv1.MetricsSourcePrometheus {
		t.Errorf("metrics source %q, want prometheus", done.Status.MetricsSource)
	}
	if ab := done.Status.Abort; ab.Reason != perfv1.ReasonHeapGrowth {
		t.Errorf("aborted for %s (%s); want HeapGrowth: the growth rule on the heap Prometheus reads, before the hard limit", ab.Reason, ab.Message)
	}
}
