// Package testenv starts a real kube-apiserver and etcd (built from source by
// hack/tools.sh into bin/) with the project's CRDs installed, for tests.
package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
)

// RepoRoot is the repository's root directory.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Env is a running control plane.
type Env struct {
	*envtest.Environment
	Config *rest.Config
}

// Start starts kube-apiserver and etcd and installs the CRDs from config/crd/bases.
// KUBEBUILDER_ASSETS, when set, names the binaries' directory; otherwise bin/ of
// the repository is used. Missing binaries are an error, never a skip: a test
// environment that silently skips hides a broken install step.
func Start() (*Env, error) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets = filepath.Join(RepoRoot(), "bin")
	}
	for _, b := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(assets, b)); err != nil {
			return nil, fmt.Errorf("%s not found in %s: run `hack/tools.sh kube` (or `make test`, which does) to build it: %w", b, assets, err)
		}
	}
	if err := perfv1.AddToScheme(scheme.Scheme); err != nil {
		return nil, err
	}
	e := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     []string{filepath.Join(RepoRoot(), "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := e.Start()
	if err != nil {
		// Start can fail after etcd and kube-apiserver are running (for example
		// when a CRD is refused); stop them so no process outlives the test.
		_ = e.Stop()
		return nil, fmt.Errorf("starting envtest control plane: %w", err)
	}
	return &Env{Environment: e, Config: cfg}, nil
}
