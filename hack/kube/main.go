// Command kube is one multi-call binary for the Kubernetes pieces the project's tests
// and local tooling run: kube-apiserver, etcd and kubectl for envtest and the
// quickstart control plane, and kube-controller-manager, kube-scheduler, kubelet and
// kube-proxy for the single-node cluster of hack/cluster.sh.
//
// It is invoked through symlinks (bin/kube-apiserver -> kube) or as
// `kube <component> [flags]`. One binary instead of one per component means the
// shared dependency graph is compiled and linked once, which keeps the cold build
// (there are no prebuilt binaries to download here) as short as it can be.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	_ "time/tzdata" // kube-apiserver needs time zones for CronJob validation.

	"go.etcd.io/etcd/server/v3/etcdmain"
	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	kubectl "k8s.io/kubectl/pkg/cmd"
	kubectlutil "k8s.io/kubectl/pkg/cmd/util"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	proxy "k8s.io/kubernetes/cmd/kube-proxy/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
)

// components maps a component name to its entry point. Each entry point reads its
// own flags from os.Args[1:], exactly as the upstream main package does.
var components = map[string]func() int{
	"kube-apiserver":          func() int { return cli.Run(apiserver.NewAPIServerCommand()) },
	"kube-controller-manager": func() int { return cli.Run(controllermanager.NewControllerManagerCommand()) },
	"kube-scheduler":          func() int { return cli.Run(scheduler.NewSchedulerCommand()) },
	"kubelet":                 func() int { return cli.Run(kubelet.NewKubeletCommand(context.Background())) },
	"kube-proxy":              func() int { return cli.Run(proxy.NewProxyCommand()) },
	"etcd": func() int {
		etcdmain.Main(os.Args)
		return 0
	},
	"kubectl": func() int {
		logs.GlogSetter(kubectl.GetLogVerbosity(os.Args)) //nolint:errcheck
		if err := cli.RunNoErrOutput(kubectl.NewDefaultKubectlCommand()); err != nil {
			kubectlutil.CheckErr(err)
		}
		return 0
	},
}

func main() {
	name := filepath.Base(os.Args[0])
	if _, ok := components[name]; !ok && len(os.Args) > 1 {
		// Called as `kube <component> ...`: drop our own name so the component
		// sees the argument vector it expects.
		name = os.Args[1]
		os.Args = os.Args[1:]
	}
	run, ok := components[name]
	if !ok {
		names := make([]string, 0, len(components))
		for n := range components {
			names = append(names, n)
		}
		sort.Strings(names)
		fmt.Fprintf(os.Stderr, "usage: kube <component> [flags]; components: %v\n", names)
		os.Exit(2)
	}
	os.Exit(run())
}
