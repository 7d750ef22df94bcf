package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
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
	Stage string `json:"stage"`
	// Variant names the variant a row compares with the stage's baseline
	// (treatment@NAME in the samples), "" for a single treatment.
	Variant string `json:"variant,omitempty"`
	// Confidence is the intervals' coverage when it is not 95 %: with k
	// variants each is at 1 − 0.05/k, as the operator reports them.
	Confidence float64               `json:"confidence,omitempty"`
	Metrics    map[string]metricJSON `json:"metrics"`
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
samples' time correlation. Pods' values at the same t_seconds are summed. An
interleaved run's sub-windows are baseline:rN and treatment:rN (round N from 1);
such a stage is compared round by round, as the operator does. A run with
spec.variants has one treatment@NAME per variant and the baseline measured after
it, baseline@NAME: each variant is compared with the baselines on both sides of
it (the stage's baseline, or the previous variant's baseline@, and its own),
pooled, its interval widened for the number of variants (Bonferroni), as the
operator does.`,
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

// windowKey is one stage's variant, in round round (0: a sequential window).
type windowKey struct {
	stage, variant string
	round          int
}

// parseVariant reads the variant column: baseline or treatment, for a
// sub-window of an interleaved stage baseline:rN or treatment:rN (N from 1),
// or treatment@NAME for spec.variants' variant NAME (returned as it is).
func parseVariant(s string) (variant string, round int, err error) {
	for _, prefix := range []string{"treatment@", "baseline@"} {
		if name, ok := strings.CutPrefix(s, prefix); ok {
			if name == "" || strings.ContainsAny(name, ":@") {
				return "", 0, fmt.Errorf("column variant is %q: want %sNAME with a variant's name", s, prefix)
			}
			return s, 0, nil
		}
	}
	v, r, hasRound := strings.Cut(s, ":r")
	if v != "baseline" && v != "treatment" {
		return "", 0, fmt.Errorf("column variant is %q, want baseline or treatment (or baseline:rN, treatment:rN, treatment@NAME)", s)
	}
	if !hasRound {
		return v, 0, nil
	}
	n, err := strconv.Atoi(r)
	if err != nil || n < 1 {
		return "", 0, fmt.Errorf("column variant is %q: the round after :r must be a number from 1", s)
	}
	return v, n, nil
}

func analyzeFile(path string) (analyzeJSON, error) {
	type point struct{ cpu, mem float64 }
	data := map[windowKey]map[float64]*point{}
	var order []string
	seen := map[string]bool{}
	rounds := map[string]int{}    // per stage, the highest round seen
	arms := map[string][]string{} // per stage, its treatment@NAME variants in order
	err := csvRows(path, samplesHeader, func(_ int, rec []string) error {
		variant, round, err := parseVariant(rec[1])
		if err != nil {
			return err
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
		k := windowKey{rec[0], variant, round}
		rounds[rec[0]] = max(rounds[rec[0]], round)
		if strings.HasPrefix(variant, "treatment@") && data[k] == nil {
			arms[rec[0]] = append(arms[rec[0]], variant)
		}
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
		if n := rounds[stage]; n > 0 {
			row, err := analyzeRounds(stage, n, series)
			if err != nil {
				return analyzeJSON{}, fmt.Errorf("%s: %w", path, err)
			}
			out.Stages = append(out.Stages, row)
			continue
		}
		treatments := arms[stage]
		if len(treatments) > 0 && len(data[windowKey{stage, "treatment", 0}]) > 0 {
			return analyzeJSON{}, fmt.Errorf("%s: stage %s mixes treatment with treatment@NAME samples", path, stage)
		}
		if len(treatments) == 0 {
			treatments = []string{"treatment"}
		}
		opts := analysis.DefaultOptions()
		opts.Confidence = analysis.FamilyConfidence(len(treatments))
		before := "baseline"
		for _, tr := range treatments {
			bc, bm := series(windowKey{stage, before, 0})
			if name, ok := strings.CutPrefix(tr, "treatment@"); ok {
				// A variant's bracket: the baseline before it and its own
				// baseline@NAME after it, pooled as the operator pools them.
				after := "baseline@" + name
				ac, am := series(windowKey{stage, after, 0})
				bc, bm = append(bc, ac...), append(bm, am...)
				before = after
			}
			tc, tm := series(windowKey{stage, tr, 0})
			if len(bc) == 0 || len(tc) == 0 {
				return analyzeJSON{}, fmt.Errorf("%s: stage %s needs both baseline and %s samples", path, stage, tr)
			}
			row := stageJSON{Stage: stage, Variant: strings.TrimPrefix(tr, "treatment@"), Metrics: map[string]metricJSON{}}
			if tr == "treatment" {
				row.Variant = ""
			}
			if opts.Confidence != analysis.DefaultConfidence {
				row.Confidence = opts.Confidence
			}
			for name, pair := range map[string][2]analysis.Series{"cpu": {bc, tc}, "memory": {bm, tm}} {
				r, err := analysis.Compare(pair[0], pair[1], opts)
				if err != nil {
					return analyzeJSON{}, fmt.Errorf("stage %s, %s: %w", stage, name, err)
				}
				row.Metrics[name] = metricJSON{Baseline: r.Baseline, Treatment: r.Treatment, Overhead: r.Overhead,
					CILow: r.CILow, CIHigh: r.CIHigh, Significant: r.Significant}
			}
			out.Stages = append(out.Stages, row)
		}
	}
	return out, nil
}

// analyzeRounds compares an interleaved stage's rounds as the operator does.
func analyzeRounds(stage string, n int, series func(windowKey) (cpu, mem analysis.Series)) (stageJSON, error) {
	var cpu, mem []analysis.RoundPair
	for r := 1; r <= n; r++ {
		bc, bm := series(windowKey{stage, "baseline", r})
		tc, tm := series(windowKey{stage, "treatment", r})
		if len(bc) == 0 || len(tc) == 0 {
			continue // an invalid round the export left out
		}
		cpu = append(cpu, analysis.RoundPair{Baseline: bc, Treatment: tc})
		mem = append(mem, analysis.RoundPair{Baseline: bm, Treatment: tm})
	}
	row := stageJSON{Stage: stage, Metrics: map[string]metricJSON{}}
	for name, rounds := range map[string][]analysis.RoundPair{"cpu": cpu, "memory": mem} {
		r, err := analysis.CompareRounds(rounds, analysis.DefaultOptions())
		if err != nil {
			return stageJSON{}, fmt.Errorf("stage %s, %s: %w", stage, name, err)
		}
		row.Metrics[name] = metricJSON{Baseline: r.Baseline, Treatment: r.Treatment, Overhead: r.Overhead,
			CILow: r.CILow, CIHigh: r.CIHigh, Significant: r.Significant}
	}
	return row, nil
}

func printAnalysis(w io.Writer, res analyzeJSON) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	// Rows of a run with variants are at their corrected confidence (one k
	// for the whole file, as the operator runs every stage with all variants).
	conf := analysis.DefaultConfidence
	for _, s := range res.Stages {
		if s.Confidence != 0 {
			conf = s.Confidence
		}
	}
	ci := intervalLabel(conf)
	fmt.Fprintf(tw, "STAGE\tMETRIC\tBASELINE\tTREATMENT\tOVERHEAD\t%s\tSIGNIFICANT\n", ci)
	for _, s := range res.Stages {
		stage := s.Stage
		if s.Variant != "" {
			stage += " " + s.Variant
		}
		for _, name := range []string{"cpu", "memory"} {
			m := s.Metrics[name]
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%+.1f%%\t[%+.1f%%, %+.1f%%]\t%v\n", stage, name,
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
