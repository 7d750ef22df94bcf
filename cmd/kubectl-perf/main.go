// Command kubectl-perf is the perf-operator's kubectl plugin (`kubectl perf ...`).
// Its offline subcommands run exactly the operator's guardrail and analysis code
// on recorded data, so an SRE can ask "would these guardrails have caught last
// week's incident?" or re-analyse exported samples without a cluster.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "kubectl-perf",
		Short:         "Work with perf-operator experiments",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(guardCmd(), analyzeCmd(), reportCmd(), abortCmd())
	return root
}

func main() {
	if err := newRoot().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
