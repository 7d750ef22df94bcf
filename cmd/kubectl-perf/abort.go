package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
)

// clusterFlags are the standard kubeconfig flags of the subcommands that talk to
// a cluster: --kubeconfig, --context and -n/--namespace.
type clusterFlags struct {
	kubeconfig, context, namespace string
}

func (f *clusterFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	cmd.Flags().StringVar(&f.context, "context", "", "the kubeconfig context to use")
	cmd.Flags().StringVarP(&f.namespace, "namespace", "n", "", "the experiment's namespace (default: the context's)")
}

// client returns a client for PerfExperiments and the namespace to use.
func (f *clusterFlags) client() (client.Client, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if f.kubeconfig != "" {
		rules.ExplicitPath = f.kubeconfig
	}
	overrides := &clientcmd.ConfigOverrides{CurrentContext: f.context}
	if f.namespace != "" {
		overrides.Context.Namespace = f.namespace
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("loading kubeconfig: %w", err)
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		return nil, "", fmt.Errorf("resolving namespace: %w", err)
	}
	scheme := runtime.NewScheme()
	if err := perfv1.AddToScheme(scheme); err != nil {
		return nil, "", err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, "", fmt.Errorf("creating client: %w", err)
	}
	return c, ns, nil
}

// objectError names the experiment in an API error.
func objectError(ns, name string, err error) error {
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("perfexperiment %s/%s not found", ns, name)
	}
	return fmt.Errorf("perfexperiment %s/%s: %w", ns, name, err)
}

func abortCmd() *cobra.Command {
	var flags clusterFlags
	cmd := &cobra.Command{
		Use:   "abort NAME [-n NAMESPACE]",
		Short: "Stop a running experiment at once and revert its toggle",
		Long: `Sets spec.abort=true on the PerfExperiment (a merge patch; spec.abort stays
mutable after the run has started). The operator stops the load, reverts the toggle
and ends the run Aborted.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ns, err := flags.client()
			if err != nil {
				return err
			}
			name := args[0]
			exp := &perfv1.PerfExperiment{}
			exp.Name, exp.Namespace = name, ns
			patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"abort":true}}`))
			if err := c.Patch(context.Background(), exp, patch); err != nil {
				return objectError(ns, name, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "perfexperiment %s/%s: abort requested\n", ns, name)
			return nil
		},
	}
	flags.add(cmd)
	return cmd
}
