// Package manager tests the operator binary as a process: it starts against a real
// apiserver, takes the leader lease, serves probes and metrics, reconciles, and on
// SIGTERM releases the lease and exits 0.
package manager

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
	"perfexp.dev/perf-operator/internal/testenv"
)

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// eventually polls cond every 200ms until it holds or the bound runs out. The
// bound only stops a broken run; it asserts nothing about speed.
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	var last string
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		var ok bool
		if ok, last = cond(); ok {
			return
		}
	}
	t.Fatalf("%s never happened; last: %s", what, last)
}

// managerBinary builds the manager into dir and writes an admin kubeconfig for
// env there.
func managerBinary(t *testing.T, env *testenv.Env, dir string) (bin, kubeconfig string) {
	t.Helper()
	bin = filepath.Join(dir, "manager")
	if err := testenv.GoBuild(bin, "./cmd/manager"); err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := env.AdminKubeconfig(dir, "operator")
	if err != nil {
		t.Fatal(err)
	}
	return bin, kubeconfig
}

func get(url string) (int, string) { return getAs(url, "") }

// getAs GETs url, over HTTPS with the manager's self-signed certificate, with a
// bearer token when one is given.
func getAs(url, token string) (int, string) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, err.Error()
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the manager's self-signed certificate
	resp, err := c.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// scraperToken is a token of a ServiceAccount bound to config/rbac's
// metrics-reader ClusterRole, as a Prometheus would have.
func scraperToken(t *testing.T, c client.Client, cfg *rest.Config) string {
	t.Helper()
	ctx := context.Background()
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "rbac", "metrics_reader_role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.Unmarshal(b, role); err != nil {
		t.Fatal(err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "scraper", Namespace: "default"}}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "scraper"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "scraper", Namespace: "default"}},
	}
	for _, o := range []client.Object{role, sa, crb} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts("default").CreateToken(ctx, "scraper", &authnv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

func TestManagerStartsServesAndStopsCleanlyOnSIGTERM(t *testing.T) {
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer env.Stop()
	c, err := client.New(env.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	bin, kcPath := managerBinary(t, env, dir)

	metrics, probes := freePort(t), freePort(t)
	logs, _ := os.Create(filepath.Join(dir, "manager.log"))
	cmd := exec.Command(bin, "--kubeconfig", kcPath, "--leader-elect", "--leader-election-namespace", "default",
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", metrics),
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", probes))
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Kill()
		if t.Failed() {
			b, _ := os.ReadFile(logs.Name())
			t.Logf("manager log:\n%s", b)
		}
	}()

	for _, p := range []string{"healthz", "readyz"} {
		eventually(t, p+" answers 200", func() (bool, string) {
			code, body := get(fmt.Sprintf("http://127.0.0.1:%d/%s", probes, p))
			return code == http.StatusOK, fmt.Sprint(code, body)
		})
	}
	ctx := context.Background()
	lease := &coordinationv1.Lease{}
	key := client.ObjectKey{Namespace: "default", Name: "perf-operator.perfexp.dev"}
	eventually(t, "the leader lease is held", func() (bool, string) {
		if err := c.Get(ctx, key, lease); err != nil {
			return false, err.Error()
		}
		return lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != "", fmt.Sprint(lease.Spec.HolderIdentity)
	})

	// The controller is registered and reconciles PerfExperiments.
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "examples", "profiling-overhead.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	exp := &perfv1.PerfExperiment{}
	if err := yaml.Unmarshal(b, exp); err != nil {
		t.Fatal(err)
	}
	exp.Namespace = "default"
	if err := c.Create(ctx, exp); err != nil {
		t.Fatal(err)
	}
	// The metrics endpoint is HTTPS and answers only callers the API server
	// authenticates and authorises for GET /metrics.
	token := scraperToken(t, c, env.Config)
	if code, body := get(fmt.Sprintf("https://127.0.0.1:%d/metrics", metrics)); code != http.StatusUnauthorized {
		t.Errorf("metrics without a token: %d %.200s; want 401", code, body)
	}
	eventually(t, "the experiment is reconciled", func() (bool, string) {
		_, body := getAs(fmt.Sprintf("https://127.0.0.1:%d/metrics", metrics), token)
		for _, line := range strings.Split(body, "\n") {
			if strings.HasPrefix(line, `controller_runtime_reconcile_total{controller="perfexperiment",result="success"}`) &&
				!strings.HasSuffix(line, " 0") {
				return true, line
			}
		}
		return false, "no successful reconcile in /metrics"
	})

	// The operator's own metrics are served beside controller-runtime's: the
	// example's target does not exist here, so it waits in Pending.
	eventually(t, "perfexp_experiments is served", func() (bool, string) {
		_, body := getAs(fmt.Sprintf("https://127.0.0.1:%d/metrics", metrics), token)
		return strings.Contains(body, `perfexp_experiments{phase="Pending"} 1`), "no perfexp_experiments{phase=\"Pending\"} 1"
	})

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("manager did not exit 0 on SIGTERM: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("manager did not exit within 60s of SIGTERM")
	}
	if err := c.Get(ctx, key, lease); err != nil {
		t.Fatal(err)
	}
	if lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != "" {
		t.Fatalf("lease still held by %q after shutdown; a new replica would wait it out", *lease.Spec.HolderIdentity)
	}
}

// The chart's pre-delete hook runs the manager with --abort-all: every
// experiment that has not ended gets spec.abort, and the command waits until
// each has ended with its toggle switched back; it fails, naming them, when some
// do not in time. Finished experiments are left alone.
func TestAbortAllEndsEveryRunBeforeUninstall(t *testing.T) {
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer env.Stop()
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(perfv1.AddToScheme(scheme))
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	bin, kc := managerBinary(t, env, t.TempDir())
	ctx := context.Background()
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "examples", "profiling-overhead.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	mk := func(name string, phase perfv1.Phase, applied bool) *perfv1.PerfExperiment {
		e := &perfv1.PerfExperiment{}
		if err := yaml.Unmarshal(b, e); err != nil {
			t.Fatal(err)
		}
		e.Namespace, e.Name = "default", name
		if err := c.Create(ctx, e); err != nil {
			t.Fatal(err)
		}
		e.Status = perfv1.PerfExperimentStatus{Phase: phase, Toggle: &perfv1.ToggleStatus{Applied: applied}}
		if err := c.Status().Update(ctx, e); err != nil {
			t.Fatal(err)
		}
		return e
	}
	running := mk("running", perfv1.PhaseTreatment, true)
	mk("finished", perfv1.PhaseSucceeded, false)

	// Nobody ends the run: the command gives up after its timeout, naming it.
	out, err := exec.Command(bin, "--kubeconfig", kc, "--abort-all", "--abort-timeout=3s").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "default/running (Treatment)") || strings.Contains(string(out), "default/finished") {
		t.Fatalf("with a run that never ends: %v\n%s", err, out)
	}
	got := &perfv1.PerfExperiment{}
	for name, want := range map[string]bool{"running": true, "finished": false} {
		if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, got); err != nil {
			t.Fatal(err)
		}
		if got.Spec.Abort != want {
			t.Errorf("%s: spec.abort %v, want %v", name, got.Spec.Abort, want)
		}
	}

	// The operator ends it (here: the test, as the operator would): the command
	// returns 0 once the toggle is switched back.
	cmd := exec.Command(bin, "--kubeconfig", kc, "--abort-all", "--abort-timeout=60s")
	var buf strings.Builder
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	time.Sleep(time.Second)
	if err := c.Get(ctx, client.ObjectKeyFromObject(running), got); err != nil {
		t.Fatal(err)
	}
	got.Status.Phase, got.Status.Toggle.Applied = perfv1.PhaseAborted, false
	if err := c.Status().Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("abort-all: %v\n%s", err, buf.String())
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("abort-all did not return once the run ended:\n%s", buf.String())
	}
}
