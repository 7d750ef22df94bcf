package main

import (
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
	"perfexp.dev/perf-operator/internal/analysis"
)

// planOptions are what plan is asked: the effect to detect, or the MDE of
// another window length or round count.
type planOptions struct {
	effect perfv1.Percent
	window time.Duration
	rounds int
}

func planCmd() *cobra.Command {
	var (
		flags clusterFlags
		o     planOptions
		eff   string
	)
	cmd := &cobra.Command{
		Use:   "plan NAME [-n NAMESPACE] [--effect PERCENT | --window DURATION | --rounds N]",
		Short: "Say how long a run must be to see a given effect, from a finished (or A/A) run",
		Long: `Reads a finished PerfExperiment (a calibration run with spec.calibrate: true is
the best source: it measures the noise alone) and prints, per stage, the minimum
detectable effect (MDE: the overhead found significant in 80 % of runs like it) on
CPU and memory, then:

  --effect 2%      the window length (sequential) or the number of rounds
                   (interleaved) that detects that effect, and the stage's wall time;
  --window 45m     the MDE of sequential windows that long;
  --rounds 8       the MDE of that many interleaved rounds.

The scaling assumes the noise stays what the run saw: the MDE of sequential windows
falls as 1/√length, that of an interleaved stage as (t(R−1,97.5%) + t(R−1,80%))/√R.`,
		Example: `  kubectl perf plan profiling-aa -n shop --effect 2%
  kubectl perf plan profiling-overhead -n shop --rounds 8`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.effect = perfv1.Percent(eff)
			set := 0
			for _, b := range []bool{eff != "", o.window != 0, o.rounds != 0} {
				if b {
					set++
				}
			}
			if set > 1 {
				return errors.New("set at most one of --effect, --window and --rounds")
			}
			exp, err := flags.experiment(args[0])
			if err != nil {
				return err
			}
			return writePlan(cmd.OutOrStdout(), exp, o)
		},
	}
	flags.add(cmd)
	cmd.Flags().StringVar(&eff, "effect", "", "the overhead to detect, such as 2% (prints the windows or rounds it needs)")
	cmd.Flags().DurationVar(&o.window, "window", 0, "print the MDE of sequential windows this long")
	cmd.Flags().IntVar(&o.rounds, "rounds", 0, "print the MDE of this many interleaved rounds")
	return cmd
}

// writePlan prints the plan for exp; it reads only the object.
func writePlan(w io.Writer, exp *perfv1.PerfExperiment, o planOptions) error {
	exp.Default()
	spec, st := &exp.Spec, &exp.Status
	var effect float64
	if o.effect != "" {
		f, err := o.effect.Fraction()
		if err != nil || f <= 0 {
			return fmt.Errorf("--effect %q: must be a percentage above 0, such as 2%%", o.effect)
		}
		effect = f
	}
	if o.window < 0 || (o.window > 0 && spec.Interleaved()) {
		return fmt.Errorf("--window is for the sequential design; %s/%s is %s (use --rounds)", exp.Namespace, exp.Name, spec.Design)
	}
	if o.rounds != 0 && (!spec.Interleaved() || o.rounds < 2 || o.rounds > analysis.MaxPlannedRounds) {
		if !spec.Interleaved() {
			return fmt.Errorf("--rounds is for the interleaved design; %s/%s is %s (use --window)", exp.Namespace, exp.Name, spec.Design)
		}
		return fmt.Errorf("--rounds %d: must be from 2 to %d", o.rounds, analysis.MaxPlannedRounds)
	}
	if len(st.Summary) == 0 {
		return fmt.Errorf("experiment %s/%s has no overhead table yet (phase %s): plan reads a finished run", exp.Namespace, exp.Name, st.Phase)
	}
	window, err := spec.Windows.Treatment.Parse()
	if err != nil {
		return fmt.Errorf("spec.windows.treatment: %w", err)
	}
	// No plan is for windows admission refuses: too short to keep the
	// samples the analysis needs.
	var least time.Duration
	var why string
	if interval, err := spec.Metrics.Interval.Parse(); err == nil && interval > 0 {
		least, why = spec.MinMeasuredWindow(interval)
	}
	if o.window > 0 && o.window < least {
		return fmt.Errorf("--window %s: must be at least %s long: %s", o.window, least, why)
	}
	base, _ := spec.Windows.Baseline.Parse()
	settle, _ := spec.Windows.Settle.Parse()
	r0 := int(spec.RoundsPerStage())
	design := fmt.Sprintf("sequential, %s + %s windows", base, window)
	if spec.Interleaved() {
		design = fmt.Sprintf("interleaved, %d rounds of %s + %s sub-windows, settle %s", r0, base, window, settle)
	}
	kind := ""
	if spec.Calibrate {
		kind = " (calibration: the MDE is the noise floor)"
	}
	fmt.Fprintf(w, "perfexperiment %s/%s: %s%s\n\n", exp.Namespace, exp.Name, design, kind)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := "STAGE\tCPU MDE\tMEMORY MDE"
	switch {
	case effect > 0 && spec.Interleaved():
		head += fmt.Sprintf("\tROUNDS FOR %s\tSTAGE TIME", o.effect)
	case effect > 0:
		head += fmt.Sprintf("\tWINDOWS FOR %s\tSTAGE TIME", o.effect)
	case o.rounds > 0:
		head += fmt.Sprintf("\tCPU MDE AT %d ROUNDS\tMEMORY MDE AT %d ROUNDS\tSTAGE TIME", o.rounds, o.rounds)
	case o.window > 0:
		head += fmt.Sprintf("\tCPU MDE AT %s\tMEMORY MDE AT %s\tSTAGE TIME", o.window, o.window)
	}
	fmt.Fprintln(tw, head)
	stageTime := func(rounds int, win time.Duration) string {
		if spec.Interleaved() {
			return (time.Duration(rounds) * (base + window + 2*settle)).String()
		}
		return (2*win + 2*settle).String()
	}
	for _, s := range st.Summary {
		cpu, mem := mdeOf(s.CPU), mdeOf(s.Memory)
		row := fmt.Sprintf("%s\t%s\t%s", s.Stage, pct(cpu), pct(mem))
		// The stage's plan follows the larger of the two MDEs.
		worst := max(cpu, mem)
		switch {
		case effect > 0 && spec.Interleaved():
			if r := analysis.RoundsFor(worst, r0, effect); r > 0 {
				row += fmt.Sprintf("\t%d\t%s", r, stageTime(r, 0))
			} else {
				row += fmt.Sprintf("\tmore than %d\t-", analysis.MaxPlannedRounds)
			}
		case effect > 0:
			if d := analysis.WindowsFor(worst, window, effect); d > 0 {
				d = max(d, least)
				row += fmt.Sprintf("\t%s\t%s", d, stageTime(0, d))
			} else {
				row += "\t-\t-"
			}
		case o.rounds > 0:
			row += fmt.Sprintf("\t%s\t%s\t%s", pct(analysis.MDEForRounds(cpu, r0, o.rounds)), pct(analysis.MDEForRounds(mem, r0, o.rounds)), stageTime(o.rounds, 0))
		case o.window > 0:
			row += fmt.Sprintf("\t%s\t%s\t%s", pct(analysis.MDEForWindows(cpu, window, o.window)), pct(analysis.MDEForWindows(mem, window, o.window)), stageTime(0, o.window))
		}
		fmt.Fprintln(tw, row)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nMDE: the overhead found significant in 80% of runs like this one; -: the stage has none (no interval)")
	return nil
}

func mdeOf(c *perfv1.MetricComparison) float64 {
	if c == nil || c.MDE == nil {
		return 0
	}
	return *c.MDE
}

func pct(f float64) string {
	if f <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", f*100)
}
