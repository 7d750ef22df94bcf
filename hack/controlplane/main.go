// Command controlplane runs a local Kubernetes control plane (kube-apiserver and
// etcd built from source into bin/) with the project's CRDs installed, writes an
// admin kubeconfig, and runs until SIGINT or SIGTERM. It is what `make quickstart`
// applies the example to while there is no real node; it has no kubelet and no
// controllers, so nothing is scheduled or run.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"perfexp.dev/perf-operator/internal/testenv"
)

func main() {
	kubeconfig := flag.String("write-kubeconfig", filepath.Join(testenv.RepoRoot(), ".state", "kubeconfig"), "Where to write the admin kubeconfig.")
	flag.Parse()
	if err := run(*kubeconfig); err != nil {
		fmt.Fprintln(os.Stderr, "controlplane:", err)
		os.Exit(1)
	}
}

func run(kubeconfig string) error {
	env, err := testenv.Start()
	if err != nil {
		return err
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "controlplane: stopping:", err)
		}
	}()
	user, err := env.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return err
	}
	b, err := user.KubeConfig()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(kubeconfig), 0o700); err != nil {
		return err
	}
	// Write then rename, so a reader never sees half a kubeconfig.
	if err := os.WriteFile(kubeconfig+".tmp", b, 0o600); err != nil {
		return err
	}
	if err := os.Rename(kubeconfig+".tmp", kubeconfig); err != nil {
		return err
	}
	defer os.Remove(kubeconfig)
	fmt.Printf("controlplane: apiserver at %s; kubeconfig %s\n", env.Config.Host, kubeconfig)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	return nil
}
