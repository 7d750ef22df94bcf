package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
)

// clusterFlags are kubectl's own connection flags (k8s.io/cli-runtime's
// ConfigFlags: --kubeconfig, --context, -n/--namespace, --as, --token,
// --server, --request-timeout, ...), so the plugin connects exactly as the
// kubectl that runs it.
type clusterFlags struct {
	cf *genericclioptions.ConfigFlags
}

func (f *clusterFlags) add(cmd *cobra.Command) {
	if f.cf == nil {
		f.cf = genericclioptions.NewConfigFlags(true)
	}
	f.cf.AddFlags(cmd.Flags())
	cmd.ValidArgsFunction = f.completeExperiments
}

// config returns the REST config and the namespace to use.
func (f *clusterFlags) config() (*rest.Config, string, error) {
	cfg, err := f.cf.ToRESTConfig()
	if err != nil {
		return nil, "", fmt.Errorf("loading kubeconfig: %w", err)
	}
	ns, _, err := f.cf.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, "", fmt.Errorf("resolving namespace: %w", err)
	}
	return cfg, ns, nil
}

// client returns a client for PerfExperiments and the namespace to use.
func (f *clusterFlags) client() (client.Client, string, error) {
	cfg, ns, err := f.config()
	if err != nil {
		return nil, "", err
	}
	c, err := client.New(cfg, client.Options{Scheme: pluginScheme()})
	if err != nil {
		return nil, "", fmt.Errorf("creating client: %w", err)
	}
	return c, ns, nil
}

// experiment reads the named PerfExperiment from the flags' namespace.
func (f *clusterFlags) experiment(name string) (*perfv1.PerfExperiment, error) {
	c, ns, err := f.client()
	if err != nil {
		return nil, err
	}
	exp := &perfv1.PerfExperiment{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, exp); err != nil {
		return nil, objectError(ns, name, err)
	}
	return exp, nil
}

// pluginScheme knows PerfExperiments.
func pluginScheme() *runtime.Scheme {
	scheme := runtime.NewScheme()
	_ = perfv1.AddToScheme(scheme)
	return scheme
}

// completeExperiments completes the one NAME argument with the experiments of
// the namespace the flags select; any error completes nothing rather than
// printing into the user's shell.
func (f *clusterFlags) completeExperiments(_ *cobra.Command, args []string, prefix string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	c, ns, err := f.client()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	list := &perfv1.PerfExperimentList{}
	if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var names []string
	for _, e := range list.Items {
		if strings.HasPrefix(e.Name, prefix) {
			phase := e.Status.Phase
			if phase == "" {
				phase = perfv1.PhasePending
			}
			names = append(names, e.Name+"\t"+string(phase))
		}
	}
	return names, cobra.ShellCompDirectiveNoFileComp
}
