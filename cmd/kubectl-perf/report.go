package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
	"perfexp.dev/perf-operator/internal/analysis"
)

// reportJSON is `kubectl perf report -o json|yaml|jsonpath=...`: the summary
// rows as stored, under apiVersion perfexp.dev/v1alpha1 and kind
// PerfExperimentReport so kubectl's printers take it.
type reportJSON struct {
	Name      string                `json:"name"`
	Namespace string                `json:"namespace"`
	Phase     perfv1.Phase          `json:"phase"`
	Verdict   perfv1.Verdict        `json:"verdict"`
	Abort     *perfv1.AbortStatus   `json:"abort"`
	Stages    []perfv1.StageSummary `json:"stages"`
}

func reportCmd() *cobra.Command {
	var (
		flags    clusterFlags
		output   string
		plot     string
		exitCode bool
	)
	cmd := &cobra.Command{
		Use:   "report NAME [-n NAMESPACE] [-o table|json|yaml|jsonpath=TEMPLATE] [--plot FILE.svg|FILE.png] [--exit-code]",
		Short: "Show an experiment's overhead table, optionally plotted as SVG or PNG",
		Long: `Reads a PerfExperiment and prints its results: a header with phase, verdict and,
if the run was aborted, why; then one row per stage with CPU (cores; delta also in
percentage points of the limit), memory (MiB) and p99 latency (ms), each baseline →
treatment with the relative overhead and its 95 % confidence interval, and the
stage's verdict. -o json or yaml prints {apiVersion, kind: PerfExperimentReport,
name, namespace, phase, verdict, abort, stages} with stages the status.summary rows
as stored; -o jsonpath=TEMPLATE (and kubectl's other template formats) reads it. --plot writes an SVG or PNG
(by the file's extension) of the run, drawn with gonum.org/v1/plot: CPU, memory
with its limit, heap (when exported) and p99 latency per window over time, every
window shaded and labelled with its stage and QPS, the toggle, revert and abort
moments marked; then each stage's overhead with its 95 % interval. Lines are the
target's totals over its pods, as the status keeps them.

--exit-code makes the exit status the outcome, for CI: 0 Pass or NoEffect, 2 Fail,
3 Inconclusive, 4 Aborted, 5 Failed, 6 still running (1 is any error).`,
		Example: `  kubectl perf report profiling-overhead -n shop
  kubectl perf report profiling-overhead -n shop -o json --exit-code
  kubectl perf report profiling-overhead -n shop -o jsonpath='{.stages[*].cpu.overhead}'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var printer printers.ResourcePrinter
			if output != "table" {
				pf := genericclioptions.NewPrintFlags("")
				pf.OutputFormat, pf.NamePrintFlags = &output, nil
				var err error
				if printer, err = pf.ToPrinter(); err != nil {
					return fmt.Errorf("-o must be table, json, yaml or jsonpath=TEMPLATE: %w", err)
				}
			}
			name := args[0]
			exp, err := flags.experiment(name)
			if err != nil {
				return err
			}
			ns := exp.Namespace
			st := exp.Status
			if len(st.Summary) == 0 && len(st.Windows) == 0 && st.Abort == nil {
				phase := st.Phase
				if phase == "" {
					phase = perfv1.PhasePending
				}
				msg := fmt.Sprintf("experiment %s/%s has no results yet (phase %s)", ns, name, phase)
				if exitCode && !phase.IsTerminal() {
					return &exitError{code: ExitNotFinished, msg: msg}
				}
				return errors.New(msg)
			}
			// With --exit-code the report is printed first, then the outcome
			// decides the exit status.
			outcome := func(err error) error {
				if err != nil || !exitCode {
					return err
				}
				if code := outcomeCode(&st); code != ExitOK {
					return &exitError{code: code, msg: fmt.Sprintf("perfexperiment %s/%s: phase %s, verdict %s: exit code %d", ns, name, st.Phase, st.Verdict, code)}
				}
				return nil
			}
			if plot != "" {
				if err := writePlotFile(plot, exp); err != nil {
					return err
				}
			}
			if printer != nil {
				obj, err := reportObject(reportJSON{Name: name, Namespace: ns, Phase: st.Phase, Verdict: st.Verdict,
					Abort: st.Abort, Stages: st.Summary})
				if err != nil {
					return err
				}
				return outcome(printer.PrintObj(obj, cmd.OutOrStdout()))
			}
			return outcome(printReport(cmd.OutOrStdout(), exp))
		},
	}
	flags.add(cmd)
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table, json, yaml, jsonpath=TEMPLATE (or another of kubectl's template formats)")
	cmd.Flags().StringVar(&plot, "plot", "", "also write a plot of the run to this file (.svg or .png)")
	cmd.Flags().BoolVar(&exitCode, "exit-code", false, "exit with the outcome's code: 0 Pass/NoEffect, 2 Fail, 3 Inconclusive, 4 Aborted, 5 Failed, 6 running")
	return cmd
}

// reportObject is the report as an object kubectl's printers accept: a
// PerfExperimentReport with apiVersion and kind, stages always a list.
func reportObject(r reportJSON) (*unstructured.Unstructured, error) {
	if r.Stages == nil {
		r.Stages = []perfv1.StageSummary{}
	}
	raw, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	obj := &unstructured.Unstructured{}
	if err := json.Unmarshal(raw, &obj.Object); err != nil {
		return nil, err
	}
	obj.SetAPIVersion(perfv1.GroupVersion.String())
	obj.SetKind("PerfExperimentReport")
	return obj, nil
}

func writePlotFile(path string, exp *perfv1.PerfExperiment) error {
	format, err := plotFormat(path)
	if err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := writePlot(f, exp, format); err != nil {
		_ = f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return f.Close()
}

func printReport(w io.Writer, exp *perfv1.PerfExperiment) error {
	st := exp.Status
	verdict := string(st.Verdict)
	if verdict == "" {
		verdict = "-"
	}
	fmt.Fprintf(w, "perfexperiment %s/%s: phase %s, verdict %s\n", exp.Namespace, exp.Name, st.Phase, verdict)
	if st.Abort != nil {
		fmt.Fprintf(w, "aborted at %s: %s: %s\n", st.Abort.At.UTC().Format("2006-01-02T15:04:05Z"), st.Abort.Reason, st.Abort.Message)
	}
	if len(st.Curve) > 0 {
		if err := printCurve(w, st); err != nil {
			return err
		}
	}
	if !exp.Spec.HasToggle() && len(st.Summary) == 0 { // a load-only sweep
		if len(st.Curve) == 0 {
			fmt.Fprintln(w, "a load-only sweep: no stage completed, no curve yet")
		}
		return nil
	}
	if len(st.Summary) == 0 {
		fmt.Fprintln(w, "no stage completed: no overhead table")
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	// With variants, each row compares one variant with the stage's
	// baseline, at the row's (Bonferroni-corrected) confidence.
	variants, ci := false, analysis.DefaultConfidence
	for _, s := range st.Summary {
		variants = variants || s.Variant != ""
		if s.Confidence != 0 {
			ci = s.Confidence
		}
	}
	ciLabel := intervalLabel(ci)
	first := "STAGE\t"
	if variants {
		first = "STAGE\tVARIANT\t"
	}
	fmt.Fprintf(tw, "%sCPU (cores)\tΔCPU\tCPU OVERHEAD (%s)\tMEMORY (MiB)\tΔMEMORY\tMEMORY OVERHEAD (%s)\tP99 (ms)\tP99 OVERHEAD (%s)\tVERDICT\n", first, ciLabel, ciLabel, ciLabel)
	for _, s := range st.Summary {
		stage := s.Stage
		if stage == "" {
			stage = fmt.Sprintf("%dqps", s.QPS)
		}
		if variants {
			stage += "\t" + s.Variant
		}
		v := string(s.Verdict)
		if !s.Trustworthy {
			v += " (untrusted)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", stage,
			values(s.CPU, 1, "%.3f"), delta(s.CPU, 1, "%+.3f"), overhead(s.CPU),
			values(s.Memory, 1<<20, "%.0f"), delta(s.Memory, 1<<20, "%+.0f"), overhead(s.Memory),
			values(s.P99, 1, "%.1f"), overhead(s.P99), v)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\npp: percentage points of the limit; *: significant (%s excludes 0); !: exceeds the success criterion\n", ciLabel)
	if variants {
		fmt.Fprintf(w, "each variant against the stage's baseline; intervals at %.1f%% each (Bonferroni), so all of them hold together at 95%%\n", 100*ci)
	}
	var gcs []string
	for _, s := range st.Summary {
		if s.GC == nil {
			continue
		}
		name := s.Stage
		if s.Variant != "" {
			name += " " + s.Variant
		}
		gcs = append(gcs, fmt.Sprintf("%s %.1f → %.1f ms/s, %s", name, s.GC.Baseline*1000, s.GC.Treatment*1000, overhead(s.GC)))
	}
	if len(gcs) > 0 {
		fmt.Fprintf(w, "time in GC (all pods): %s\n", strings.Join(gcs, "; "))
	}
	var mdes []string
	for _, s := range st.Summary {
		if m := mdeLine(s); m != "" {
			name := s.Stage
			if s.Variant != "" {
				name += " " + s.Variant
			}
			mdes = append(mdes, name+": "+m)
		}
	}
	if len(mdes) > 0 {
		fmt.Fprintf(w, "could detect (80%% power): %s\n", strings.Join(mdes, "; "))
	}
	if line := designLine(exp); line != "" {
		fmt.Fprintln(w, line)
	}
	return nil
}

// printCurve prints the load curve (status.curve) and its knee.
func printCurve(w io.Writer, st perfv1.PerfExperimentStatus) error {
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STAGE\tLOAD\tACHIEVED (req/s)\tP50 (ms)\tP95 (ms)\tP99 (ms)\tERRORS\tCPU (cores)\tCPU % LIMIT\tMEMORY (MiB)\t")
	for i, p := range st.Curve {
		load := fmt.Sprintf("%d req/s", p.QPS)
		if p.Concurrency > 0 {
			load = fmt.Sprintf("%d users", p.Concurrency)
		}
		note := ""
		if !p.Valid {
			note = "(load short or samples missing)"
		}
		if k := st.Knee; k != nil && int(k.Index) == i {
			note = "← knee " + note
		}
		fmt.Fprintf(tw, "%s\t%s\t%.1f\t%.1f\t%.1f\t%.1f\t%.2f%%\t%s\t%s\t%s\t%s\n", p.Stage, load, p.AchievedQPS, p.P50Ms, p.P95Ms, p.P99Ms, p.ErrorPercent,
			optFloat(p.CPUCores, 1, "%.3f"), optFloat(p.CPUPercentOfLimit, 1, "%.1f"), optInt(p.MemoryBytes, 1<<20, "%.0f"), note)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if k := st.Knee; k != nil {
		fmt.Fprintf(w, "knee: stage %s, capacity about %.1f req/s: %s\n", k.Stage, k.CapacityQPS, k.Reason)
	} else if st.Phase == perfv1.PhaseSucceeded {
		fmt.Fprintln(w, "knee: none, every stage kept up (spec.knee)")
	}
	return nil
}

func optFloat(v *float64, scale float64, f string) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf(f, *v/scale)
}

func optInt(v *int64, scale float64, f string) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf(f, float64(*v)/scale)
}

// mdeLine is a stage's minimum detectable effects, such as "CPU ≥ 3.1%,
// memory ≥ 0.8%".
func mdeLine(s perfv1.StageSummary) string {
	var parts []string
	for _, m := range []struct {
		name string
		c    *perfv1.MetricComparison
	}{{"CPU", s.CPU}, {"memory", s.Memory}, {"heap", s.Heap}} {
		if m.c != nil && m.c.MDE != nil {
			parts = append(parts, fmt.Sprintf("%s ≥ %.1f%%", m.name, *m.c.MDE*100))
		}
	}
	return strings.Join(parts, ", ")
}

// designLine says how the run was laid out when it was not the default
// sequential design: the rounds and their orders, or an A/A calibration.
func designLine(exp *perfv1.PerfExperiment) string {
	var parts []string
	if exp.Spec.Calibrate {
		parts = append(parts, "calibration (A/A): the toggle was never switched; each MDE is the noise floor")
	}
	if il := exp.Status.Interleaving; il != nil {
		orders := map[int32][]string{}
		var stages []int32
		for _, r := range il.Rounds {
			if len(orders[r.Stage]) == 0 {
				stages = append(stages, r.Stage)
			}
			orders[r.Stage] = append(orders[r.Stage], r.Order)
		}
		var per []string
		for _, s := range stages {
			name := fmt.Sprint(s + 1)
			if int(s) < len(exp.Spec.Stages) {
				name = exp.Spec.StageName(int(s))
			}
			per = append(per, name+" "+strings.Join(orders[s], " "))
		}
		parts = append(parts, fmt.Sprintf("design interleaved (seed %d), rounds: %s", il.Seed, strings.Join(per, "; ")))
	}
	return strings.Join(parts, "\n")
}

// intervalLabel names intervals at confidence c: "95% CI", or "98.3% CI" for
// a run's Bonferroni-corrected variants.
func intervalLabel(c float64) string {
	if c == analysis.DefaultConfidence {
		return "95% CI"
	}
	return fmt.Sprintf("%.1f%% CI", 100*c)
}

func values(m *perfv1.MetricComparison, scale float64, f string) string {
	if m == nil {
		return "-"
	}
	return fmt.Sprintf(f+" → "+f, m.Baseline/scale, m.Treatment/scale)
}

func delta(m *perfv1.MetricComparison, scale float64, f string) string {
	if m == nil {
		return "-"
	}
	s := fmt.Sprintf(f, m.Delta/scale)
	if m.DeltaPercentOfLimit != nil {
		s += fmt.Sprintf(" (%+.1f pp)", *m.DeltaPercentOfLimit)
	}
	return s
}

func overhead(m *perfv1.MetricComparison) string {
	if m == nil {
		return "-"
	}
	s := fmt.Sprintf("%+.1f%% [%+.1f, %+.1f]", m.Overhead*100, m.CILow*100, m.CIHigh*100)
	if m.Material {
		s += " !"
	} else if m.Significant {
		s += " *"
	}
	return s
}
