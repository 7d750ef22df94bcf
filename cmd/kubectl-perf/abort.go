package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
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

// config returns the REST config and the namespace to use.
func (f *clusterFlags) config() (*rest.Config, string, error) {
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

// pluginScheme knows PerfExperiments.
func pluginScheme() *runtime.Scheme {
	scheme := runtime.NewScheme()
	_ = perfv1.AddToScheme(scheme)
	return scheme
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
and ends the run Aborted. A run that has already ended (Succeeded, Failed, Aborted)
is refused: there is nothing left to stop, and its result stays as it is.`,
		Example: `  kubectl perf abort profiling-overhead -n shop`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ns, err := flags.client()
			if err != nil {
				return err
			}
			name := args[0]
			msg, err := abort(context.Background(), c, client.ObjectKey{Namespace: ns, Name: name})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "perfexperiment %s/%s: %s\n", ns, name, msg)
			return nil
		},
	}
	flags.add(cmd)
	return cmd
}

// abort sets spec.abort on a run that has not ended. The patch carries the
// resourceVersion read, so a run that ends between the read and the patch is
// re-read (a conflict) and then refused, never patched after the fact.
func abort(ctx context.Context, c client.Client, key client.ObjectKey) (string, error) {
	var msg string
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		exp := &perfv1.PerfExperiment{}
		if err := c.Get(ctx, key, exp); err != nil {
			return err
		}
		if st := exp.Status; st.Phase.IsTerminal() {
			why := fmt.Sprintf("phase %s, verdict %s", st.Phase, st.Verdict)
			if st.Abort != nil {
				why += fmt.Sprintf(", %s: %s", st.Abort.Reason, st.Abort.Message)
			}
			return fmt.Errorf("perfexperiment %s/%s has already ended (%s): nothing to abort", key.Namespace, key.Name, why)
		}
		if exp.Spec.Abort {
			msg = "abort already requested; the operator is stopping it"
			return nil
		}
		before := exp.DeepCopy()
		exp.Spec.Abort = true
		msg = "abort requested"
		return c.Patch(ctx, exp, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
	})
	var api apierrors.APIStatus
	if errors.As(err, &api) {
		return "", objectError(key.Namespace, key.Name, err)
	}
	return msg, err
}
