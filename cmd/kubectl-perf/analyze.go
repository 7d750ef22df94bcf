package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"perfexp.dev/perf-operator/internal/analysis"
)

var samplesHeader = []string{"stage", "variant", "t_seconds", "pod", "cpu_cores", "memory_bytes"}

// metricJSON is one metric's comparison; overheads are fractions (0.041 = +4.1 %).
type metricJSON struct {
	Baseline    float64 `json:"baseline"`
	Treatment   float64 `json:"treatment"`
	Overhead    float64 `json:"overhead"`
	CILow       float64 `json:"ciLow"`
	CIHigh      float64 `json:"ciHigh"`
	Significant bool    `json:"significant"`
}

type stageJSON struct {
	Stage   string                `json:"stage"`
	Metrics map[string]metricJSON `json:"metrics"`
}

type analyzeJSON struct {
	Stages []stageJSON `json:"stages"`
}

func analyzeCmd() *cobra.Command {
	var samples, output string
	cmd := &cobra.Command{
		Use:   "analyze --samples FILE.csv [-o json|table]",
		Short: "Analyse exported window samples with the operator's statistics",
		Long: `Analyses exported samples (CSV header stage,variant,t_seconds,pod,cpu_cores,memory_bytes;
variants baseline and treatment) exactly as the operator does: per stage and metric, the
relative overhead of the treatment with a 95 % confidence interval that respects the
samples' time correlation. Pods' values at the same t_seconds are summed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "json" && output != "table" {
				return fmt.Errorf("-o must be json or table, not %q", output)
			}
			res, err := analyzeFile(samples)
			if err != nil {
				return err
			}
			if output == "table" {
				return printAnalysis(cmd.OutOrStdout(), res)
			}
			return json.NewEncoder(cmd.OutOrStdout()).Encode(res)
		},
	}
	cmd.Flags().StringVar(&samples, "samples", "", "window samples CSV (required)")
	cmd.Flags().StringVarP(&output, "output", "o", "json", "output format: json or table")
	_ = cmd.MarkFlagRequired("samples")
	return cmd
}

// windowKey is one stage's variant.
type windowKey struct{ stage, variant string }

func analyzeFile(path string) (analyzeJSON, error) {
	type point struct{ cpu, mem float64 }
	data := map[windowKey]map[float64]*point{}
	var order []string
	seen := map[string]bool{}
	err := csvRows(path, samplesHeader, func(_ int, rec []string) error {
		if rec[1] != "baseline" && rec[1] != "treatment" {
			return fmt.Errorf("column variant is %q, want baseline or treatment", rec[1])
		}
		t, _, err := number(rec, 2, "t_seconds", false)
		if err != nil {
			return err
		}
		cpu, _, err := number(rec, 4, "cpu_cores", false)
		if err != nil {
			return err
		}
		mem, _, err := number(rec, 5, "memory_bytes", false)
		if err != nil {
			return err
		}
		if !seen[rec[0]] {
			seen[rec[0]] = true
			order = append(order, rec[0])
		}
		k := windowKey{rec[0], rec[1]}
		if data[k] == nil {
			data[k] = map[float64]*point{}
		}
		p := data[k][t]
		if p == nil {
			p = &point{}
			data[k][t] = p
		}
		p.cpu += cpu
		p.mem += mem
		return nil
	})
	if err != nil {
		return analyzeJSON{}, err
	}
	series := func(k windowKey) (cpu, mem analysis.Series) {
		ts := make([]float64, 0, len(data[k]))
		for t := range data[k] {
			ts = append(ts, t)
		}
		sort.Float64s(ts)
		for _, t := range ts {
			cpu = append(cpu, data[k][t].cpu)
			mem = append(mem, data[k][t].mem)
		}
		return cpu, mem
	}
	out := analyzeJSON{Stages: []stageJSON{}}
	for _, stage := range order {
		bc, bm := series(windowKey{stage, "baseline"})
		tc, tm := series(windowKey{stage, "treatment"})
		if len(bc) == 0 || len(tc) == 0 {
			return analyzeJSON{}, fmt.Errorf("%s: stage %s needs both baseline and treatment samples", path, stage)
		}
		row := stageJSON{Stage: stage, Metrics: map[string]metricJSON{}}
		for name, pair := range map[string][2]analysis.Series{"cpu": {bc, tc}, "memory": {bm, tm}} {
			r, err := analysis.Compare(pair[0], pair[1], analysis.DefaultOptions())
			if err != nil {
				return analyzeJSON{}, fmt.Errorf("stage %s, %s: %w", stage, name, err)
			}
			row.Metrics[name] = metricJSON{Baseline: r.Baseline, Treatment: r.Treatment, Overhead: r.Overhead,
				CILow: r.CILow, CIHigh: r.CIHigh, Significant: r.Significant}
		}
		out.Stages = append(out.Stages, row)
	}
	return out, nil
}

func printAnalysis(w io.Writer, res analyzeJSON) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STAGE\tMETRIC\tBASELINE\tTREATMENT\tOVERHEAD\t95% CI\tSIGNIFICANT")
	for _, s := range res.Stages {
		for _, name := range []string{"cpu", "memory"} {
			m := s.Metrics[name]
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%+.1f%%\t[%+.1f%%, %+.1f%%]\t%v\n", s.Stage, name,
				unit(name, m.Baseline), unit(name, m.Treatment), m.Overhead*100, m.CILow*100, m.CIHigh*100, m.Significant)
		}
	}
	return tw.Flush()
}

func unit(metric string, v float64) string {
	if metric == "cpu" {
		return fmt.Sprintf("%.3f cores", v)
	}
	return fmt.Sprintf("%.1f MiB", v/(1<<20))
}
