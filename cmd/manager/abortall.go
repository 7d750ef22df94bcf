package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
)

// abortAll is the uninstall path (the chart's pre-delete hook runs it while the
// operator still runs): it sets spec.abort on every experiment that has not
// ended, in the given namespaces or all, and waits until each has ended with
// its toggle switched back (or is gone), so an uninstall never leaves a toggle
// on. It fails, naming them, on experiments still running at the deadline.
func abortAll(ctx context.Context, c client.Client, namespaces []string, timeout time.Duration, poll time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	pending, err := listUnfinished(ctx, c, namespaces)
	if err != nil {
		return err
	}
	patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"abort":true}}`))
	for _, e := range pending {
		if e.Spec.Abort {
			continue
		}
		if err := c.Patch(ctx, e, patch); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("aborting %s/%s: %w", e.Namespace, e.Name, err)
		}
	}
	for {
		left, err := listUnfinished(ctx, c, namespaces)
		if err != nil {
			return err
		}
		if len(left) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			names := make([]string, len(left))
			for i, e := range left {
				names[i] = e.Namespace + "/" + e.Name + " (" + string(e.Status.Phase) + ")"
			}
			sort.Strings(names)
			return fmt.Errorf("%d experiments did not end, or did not switch their toggle back, within %s: %s", len(left), timeout, strings.Join(names, ", "))
		case <-time.After(poll):
		}
	}
}

// listUnfinished lists the experiments that have not ended, or ended with the
// toggle still possibly on.
func listUnfinished(ctx context.Context, c client.Client, namespaces []string) ([]*perfv1.PerfExperiment, error) {
	if len(namespaces) == 0 {
		namespaces = []string{""}
	}
	var out []*perfv1.PerfExperiment
	for _, ns := range namespaces {
		var list perfv1.PerfExperimentList
		if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return nil, fmt.Errorf("listing experiments: %w", err)
		}
		for i := range list.Items {
			e := &list.Items[i]
			on := e.Status.Toggle != nil && (e.Status.Toggle.Applied || len(e.Status.Toggle.Pods) > 0)
			if !e.Status.Phase.IsTerminal() || on {
				out = append(out, e)
			}
		}
	}
	return out, nil
}
