package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
)

func waitCmd() *cobra.Command {
	var (
		flags   clusterFlags
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "wait NAME [-n NAMESPACE] [--timeout DURATION]",
		Short: "Follow an experiment until it ends; the exit code is its outcome",
		Long: `Watches a PerfExperiment (one watch, no polling) and prints each change of its
phase or of what it waits for, until the run ends. The exit code is the outcome,
for CI: 0 Pass or NoEffect, 2 Fail, 3 Inconclusive, 4 Aborted, 5 Failed; 7 when
--timeout passes first, 8 when the run is Stalled (only a person can help: the
target is missing or has no limits, ...); 1 is any error. A run queued behind
another experiment on the same target is waited for, not failed. --timeout 0 (the
default) waits without limit. See docs/plugin.md and docs/gates.md.`,
		Example: `  kubectl perf wait profiling-overhead -n shop --timeout 4h`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, ns, err := flags.config()
			if err != nil {
				return err
			}
			c, err := client.NewWithWatch(cfg, client.Options{Scheme: pluginScheme()})
			if err != nil {
				return fmt.Errorf("creating client: %w", err)
			}
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			if timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, timeout)
				defer cancel()
			}
			return waitFor(ctx, c, client.ObjectKey{Namespace: ns, Name: args[0]}, timeout, cmd.OutOrStdout())
		},
	}
	flags.add(cmd)
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "give up after this long with exit code 7 (0: no limit)")
	return cmd
}

// waitFor follows one experiment with a watch from the resourceVersion it
// read, re-reading only when the watch ends (the apiserver closes watches
// after a while), and returns nil on a good ending, an *exitError otherwise.
func waitFor(ctx context.Context, c client.WithWatch, key client.ObjectKey, timeout time.Duration, out io.Writer) error {
	p := &progress{out: out, key: key}
	for {
		exp := &perfv1.PerfExperiment{}
		if err := c.Get(ctx, key, exp); err != nil {
			if ctx.Err() != nil {
				return p.timedOut(timeout)
			}
			return objectError(key.Namespace, key.Name, err)
		}
		if done, err := p.see(exp); done {
			return err
		}
		w, err := c.Watch(ctx, &perfv1.PerfExperimentList{}, client.InNamespace(key.Namespace),
			client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", key.Name)},
			&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: exp.ResourceVersion, AllowWatchBookmarks: true}})
		if err != nil {
			if ctx.Err() != nil {
				return p.timedOut(timeout)
			}
			return objectError(key.Namespace, key.Name, err)
		}
		done, err := p.follow(ctx, w)
		w.Stop()
		if done {
			return err
		}
		if ctx.Err() != nil {
			return p.timedOut(timeout)
		}
	}
}

// progress prints what changed and decides when the wait is over.
type progress struct {
	out  io.Writer
	key  client.ObjectKey
	last string
}

// follow reads one watch until the run ends or the watch does.
func (p *progress) follow(ctx context.Context, w watch.Interface) (bool, error) {
	for {
		select {
		case <-ctx.Done():
			return false, nil
		case ev, ok := <-w.ResultChan():
			if !ok {
				return false, nil
			}
			switch ev.Type {
			case watch.Deleted:
				return true, fmt.Errorf("perfexperiment %s/%s was deleted before it ended", p.key.Namespace, p.key.Name)
			case watch.Error:
				return false, nil // expired: re-read and watch again
			case watch.Added, watch.Modified:
				if exp, ok := ev.Object.(*perfv1.PerfExperiment); ok {
					if done, err := p.see(exp); done {
						return true, err
					}
				}
			}
		}
	}
}

// see prints exp's state if it changed and says whether the wait is over.
func (p *progress) see(exp *perfv1.PerfExperiment) (bool, error) {
	st := &exp.Status
	phase := st.Phase
	if phase == "" {
		phase = perfv1.PhasePending
	}
	name := fmt.Sprintf("perfexperiment %s/%s", p.key.Namespace, p.key.Name)
	if phase.IsTerminal() {
		line := fmt.Sprintf("%s: phase %s, verdict %s", name, phase, st.Verdict)
		if st.Abort != nil {
			line += fmt.Sprintf(" (%s: %s)", st.Abort.Reason, st.Abort.Message)
		}
		fmt.Fprintln(p.out, line)
		if code := outcomeCode(st); code != ExitOK {
			return true, &exitError{code: code, msg: fmt.Sprintf("%s: phase %s, verdict %s: exit code %d", name, phase, st.Verdict, code)}
		}
		return true, nil
	}
	// A status older than the spec says nothing about the spec: wait for the
	// operator to catch up before judging a stall.
	current := st.ObservedGeneration >= exp.Generation
	why := ""
	for _, t := range []string{perfv1.ConditionStalled, perfv1.ConditionReconciling} {
		if c := meta.FindStatusCondition(st.Conditions, t); c != nil && c.Status == metav1.ConditionTrue {
			why = c.Reason + ": " + c.Message
			if t == perfv1.ConditionStalled && current {
				fmt.Fprintf(p.out, "%s: phase %s, stalled: %s\n", name, phase, why)
				return true, &exitError{code: ExitStalled, msg: fmt.Sprintf("%s is stalled (%s): exit code %d", name, why, ExitStalled)}
			}
			break
		}
	}
	line := fmt.Sprintf("%s: phase %s", name, phase)
	if why != "" {
		line += ": " + why
	}
	if line != p.last {
		fmt.Fprintln(p.out, line)
		p.last = line
	}
	return false, nil
}

func (p *progress) timedOut(timeout time.Duration) error {
	msg := fmt.Sprintf("perfexperiment %s/%s: timed out after %s before the run ended: exit code %d", p.key.Namespace, p.key.Name, timeout, ExitTimeout)
	if p.last != "" {
		msg += " (last seen: " + p.last + ")"
	}
	return &exitError{code: ExitTimeout, msg: msg}
}
