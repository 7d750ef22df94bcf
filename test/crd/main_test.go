// Package crd tests the PerfExperiment CRD against a real kube-apiserver: what is
// refused at `kubectl apply` (OpenAPI and CEL rules), what is defaulted, what
// `kubectl explain` shows, and that every example is accepted.
package crd

import (
	"fmt"
	"os"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"perfexp.dev/perf-operator/internal/testenv"
)

var (
	env *testenv.Env
	k8s client.Client
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
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
	k8s, err = client.New(env.Config, client.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}
