// Package chart tests the Helm chart in charts/perf-operator and the kustomize
// tree in config/: `helm lint --strict`, every rendered object accepted by a real
// kube-apiserver (server-side dry run, strict field validation) with our CRD and
// the Prometheus Operator's CRDs installed, values refused by the schema naming
// the key, no drift from the generated CRD and RBAC or from config/manager, and
// valid alerting rules and dashboard queries.
package chart

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"perfexp.dev/perf-operator/internal/testenv"
)

// The Prometheus Operator whose ServiceMonitor and PrometheusRule CRDs the
// rendered monitoring objects are validated against. Its module zip carries the
// CRD YAMLs (example/prometheus-operator-crd/); the hash pins the bytes, so a
// changed upload cannot change what is tested. It is the version the local
// cluster's monitoring stack runs (hack/monitoring/go.mod), whose CRDs
// hack/monitoring.sh installs from the same module.
const (
	promOperatorModule  = "github.com/prometheus-operator/prometheus-operator"
	promOperatorVersion = "v0.94.1"
	promOperatorSum     = "h1:QEIb2wenPH+SdMN1xMf8l4Pmj00YYXXI6HlbLlQWkww="
)

// release and namespace are what every render installs as.
const (
	release   = "perf-operator"
	namespace = "perf-operator-system"
)

var (
	env     *testenv.Env
	k8s     client.Client
	helm    string // bin/helm
	kubectl string // bin/kubectl
	chart   = filepath.Join(testenv.RepoRoot(), "charts", "perf-operator")
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	// Helm keeps its caches, plugins and repositories under $HOME; the tests use
	// none of them and leave the user's alone.
	helmHome, err := os.MkdirTemp("", "helm-home")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(helmHome)
	for _, v := range []string{"HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME"} {
		os.Setenv(v, filepath.Join(helmHome, v))
	}
	if helm, err = tool("helm", "hack/tools.sh helm"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if kubectl, err = tool("kubectl", "hack/tools.sh kube"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	crds, err := promOperatorCRDs()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	env, err = testenv.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping envtest:", err)
		}
	}()
	if _, err := envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{Paths: crds, ErrorIfPathMissing: true}); err != nil {
		fmt.Fprintln(os.Stderr, "installing the Prometheus Operator CRDs:", err)
		return 1
	}
	if k8s, err = client.New(env.Config, client.Options{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// tool finds a binary built by hack/tools.sh: in KUBEBUILDER_ASSETS when set (as
// testenv does), else in bin/. Missing is an error naming the command that
// builds it, never a skip.
func tool(name, build string) (string, error) {
	dirs := []string{filepath.Join(testenv.RepoRoot(), "bin")}
	if a := os.Getenv("KUBEBUILDER_ASSETS"); a != "" {
		dirs = append([]string{a}, dirs...)
	}
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found in %v: run `%s` (or `make test`, which does) to build it", name, dirs, build)
}

// promOperatorCRDs fetches the pinned Prometheus Operator module through the Go
// module proxy (or the module cache) and returns its ServiceMonitor,
// PrometheusRule, PodMonitor and Prometheus CRD files. It runs outside this module, so go.mod and go.sum are
// never touched, and checks the module's hash itself.
func promOperatorCRDs() ([]string, error) {
	dir, err := os.MkdirTemp("", "promop")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	cmd := exec.Command("go", "mod", "download", "-json", promOperatorModule+"@"+promOperatorVersion)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go mod download %s@%s: %v: %s%s", promOperatorModule, promOperatorVersion, err, stderr.String(), out)
	}
	var mod struct{ Dir, Sum, Error string }
	if err := json.Unmarshal(out, &mod); err != nil {
		return nil, fmt.Errorf("go mod download -json printed %q: %v", out, err)
	}
	if mod.Error != "" {
		return nil, fmt.Errorf("go mod download %s@%s: %s", promOperatorModule, promOperatorVersion, mod.Error)
	}
	if mod.Sum != promOperatorSum {
		return nil, fmt.Errorf("%s@%s has hash %s, pinned %s", promOperatorModule, promOperatorVersion, mod.Sum, promOperatorSum)
	}
	var files []string
	for _, kind := range []string{"servicemonitors", "prometheusrules", "podmonitors", "prometheuses"} {
		f := filepath.Join(mod.Dir, "example", "prometheus-operator-crd", "monitoring.coreos.com_"+kind+".yaml")
		if _, err := os.Stat(f); err != nil {
			return nil, fmt.Errorf("the %s CRD is not where %s@%s kept it: %w", kind, promOperatorModule, promOperatorVersion, err)
		}
		files = append(files, f)
	}
	return files, nil
}
