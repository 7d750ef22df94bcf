//go:build e2e

// Package e2e runs the local examples on a real single-node cluster: the
// operator installed by its Helm chart, the toy app as the target, k6 Jobs as
// the load, metrics-server as the metrics source. Nothing here is simulated: the
// CPU is spent, the heap grows, the pods roll.
//
// Run with `make e2e` (part of `make test`). Without E2E_KUBECONFIG, TestMain
// brings the local cluster up with hack/local.sh (building what it needs) and
// tears it down at the end; E2E_KEEP=1 leaves it running for inspection.
// Windows are short (about a minute) so the suite fits CI; the examples keep
// their longer windows.
package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
	"perfexp.dev/perf-operator/internal/testenv"
)

var (
	k8s        client.Client
	restConfig *rest.Config
	kubeconfig string
	scheme     = runtime.NewScheme()
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	// The suite's client logs nothing of its own; without a logger
	// controller-runtime prints a stack trace saying none was set.
	log.SetLogger(logr.Discard())
	_ = clientgoscheme.AddToScheme(scheme)
	_ = perfv1.AddToScheme(scheme)
	root := testenv.RepoRoot()
	kubeconfig = os.Getenv("E2E_KUBECONFIG")
	up := exec.Command(filepath.Join(root, "hack", "local.sh"), "up")
	up.Stdout, up.Stderr = os.Stdout, os.Stderr
	if kubeconfig != "" {
		up.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	} else {
		kubeconfig = filepath.Join(root, ".state", "cluster", "admin.kubeconfig")
		if os.Getenv("E2E_KEEP") == "" {
			defer down(root)
		}
	}
	if err := up.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: hack/local.sh up:", err)
		return 1
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	// Every API call is bounded; the tests' contexts (t.Context()) end with them.
	cfg.Timeout = 30 * time.Second
	restConfig = cfg
	if k8s, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	return m.Run()
}

func down(root string) {
	cmd := exec.Command(filepath.Join(root, "hack", "local.sh"), "down")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	_ = cmd.Run()
}
