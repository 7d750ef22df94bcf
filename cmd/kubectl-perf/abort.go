package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
)

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
