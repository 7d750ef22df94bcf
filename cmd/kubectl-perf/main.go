// Command kubectl-perf is the perf-operator's kubectl plugin (`kubectl perf ...`).
// Its offline subcommands run exactly the operator's guardrail and analysis code
// on recorded data, so an SRE can ask "would these guardrails have caught last
// week's incident?" or re-analyse exported samples without a cluster.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is set at build time (-ldflags "-X main.version=v0.1.0"); otherwise
// the module version Go recorded, or "(devel)".
var version = ""

func newRoot() *cobra.Command {
	root := &cobra.Command{
		// kubectl finds the binary as kubectl-perf and users type `kubectl perf`:
		// help, usage and examples say what they type.
		Use:           "kubectl-perf",
		Short:         "Work with perf-operator experiments",
		SilenceUsage:  true,
		SilenceErrors: true,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl perf"},
		Example: `  kubectl perf wait profiling-overhead -n shop --timeout 4h
  kubectl perf report profiling-overhead -n shop --exit-code
  kubectl perf abort profiling-overhead -n shop
  kubectl perf guard --trace incident.csv --toggle-at 1200 -f examples/death-spiral.yaml`,
	}
	root.AddCommand(guardCmd(), analyzeCmd(), reportCmd(), waitCmd(), planCmd(), exportCmd(), abortCmd(), versionCmd())
	return root
}

func versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the plugin's version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			printVersion(cmd.OutOrStdout())
			return nil
		},
	}
}

func printVersion(w io.Writer) {
	v, commit := version, ""
	if info, ok := debug.ReadBuildInfo(); ok {
		if v == "" {
			v = info.Main.Version
		}
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				commit = ", commit " + s.Value[:12]
			}
		}
	}
	if v == "" {
		v = "(devel)"
	}
	fmt.Fprintf(w, "kubectl-perf %s (%s%s)\n", v, runtime.Version(), commit)
}

func main() {
	code, msg := exitStatus(newRoot().Execute())
	if msg != "" {
		fmt.Fprintln(os.Stderr, msg)
	}
	os.Exit(code)
}

// exitStatus is the exit code and the stderr line of a command's result: an
// outcome's own code (--exit-code), ExitError for any other error.
func exitStatus(err error) (int, string) {
	var exit *exitError
	switch {
	case err == nil:
		return ExitOK, ""
	case errors.As(err, &exit):
		return exit.code, exit.msg
	}
	return ExitError, "error: " + err.Error()
}
