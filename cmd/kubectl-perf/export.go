package main

import (
	"encoding/csv"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"

	"github.com/spf13/cobra"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
)

func exportCmd() *cobra.Command {
	var (
		flags          clusterFlags
		samples, trace string
	)
	cmd := &cobra.Command{
		Use:   "export NAME [-n NAMESPACE] [--samples FILE.csv] [--trace FILE.csv]",
		Short: "Write an experiment's recorded series as the CSV files analyze and guard read",
		Long: `Reads a PerfExperiment and writes what its status recorded:

--samples: the measured windows as ` + "`kubectl perf analyze --samples`" + ` reads them
(stage,variant,t_seconds,pod,cpu_cores,memory_bytes): for every stage the baseline and
treatment window the operator analysed, t_seconds from the window's first point.

--trace: the memory over the whole run as ` + "`kubectl perf guard --trace`" + ` reads it
(t_seconds,pod,working_set_bytes,heap_bytes,limit_bytes), t_seconds from the run's
start; the line printed gives the --toggle-at of the first toggle.

The status keeps the target's totals over its pods, not each pod: both files carry
them as one pod named "all", with the memory limit of all pods together. The status
keeps no timestamp per point: the i-th point of a window is placed at its start plus
(i+1) steps.`,
		Example: `  kubectl perf export profiling-overhead -n shop --samples samples.csv --trace trace.csv
  kubectl perf analyze --samples samples.csv -o table`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if samples == "" && trace == "" {
				return errors.New("nothing to export: give --samples FILE.csv, --trace FILE.csv or both")
			}
			exp, err := flags.experiment(args[0])
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if samples != "" {
				n, err := writeCSV(samples, func(w *csv.Writer) (int, error) { return exportSamples(w, exp) })
				if err != nil {
					return err
				}
				fmt.Fprintf(out, "wrote %d samples to %s\n", n, samples)
			}
			if trace != "" {
				var toggleAt *float64
				n, err := writeCSV(trace, func(w *csv.Writer) (int, error) {
					var err error
					var n int
					n, toggleAt, err = exportTrace(w, exp)
					return n, err
				})
				if err != nil {
					return err
				}
				fmt.Fprintf(out, "wrote %d trace rows to %s", n, trace)
				if toggleAt != nil {
					fmt.Fprintf(out, "; the toggle was first applied at --toggle-at %s", strconv.FormatFloat(*toggleAt, 'f', -1, 64))
				}
				fmt.Fprintln(out)
			}
			return nil
		},
	}
	flags.add(cmd)
	cmd.Flags().StringVar(&samples, "samples", "", "write the measured windows' samples to this CSV file")
	cmd.Flags().StringVar(&trace, "trace", "", "write the run's memory trace to this CSV file")
	return cmd
}

func writeCSV(path string, rows func(*csv.Writer) (int, error)) (int, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	w := csv.NewWriter(f)
	n, err := rows(w)
	if err == nil {
		w.Flush()
		err = w.Error()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, fmt.Errorf("writing %s: %w", path, err)
	}
	return n, nil
}

// exportedWindows are a stage's windows the analysis reads: the last baseline
// and treatment window, or every valid sub-window of an interleaved stage
// (rounds with an invalid sub-window are left out, as the operator leaves them).
func exportedWindows(exp *perfv1.PerfExperiment, stage int32) []*perfv1.WindowStatus {
	var out []*perfv1.WindowStatus
	if exp.Status.Interleaving == nil {
		if win := lastWindow(exp.Status.Windows, stage, perfv1.VariantBaseline, ""); win != nil && win.Series != nil {
			out = append(out, win)
		}
		arms := []string{""} // spec.toggle's treatment, or each variant's
		if len(exp.Spec.Variants) > 0 {
			arms = nil
			for _, v := range exp.Spec.Variants {
				arms = append(arms, v.Name)
			}
		}
		for _, arm := range arms {
			if win := lastWindow(exp.Status.Windows, stage, perfv1.VariantTreatment, arm); win != nil && win.Series != nil {
				out = append(out, win)
			}
			if arm == "" {
				continue
			}
			// The baseline measured after the variant: half of its bracket.
			if win := lastWindow(exp.Status.Windows, stage, perfv1.VariantBaseline, arm); win != nil && win.Series != nil {
				out = append(out, win)
			}
		}
		return out
	}
	byRound := map[int32][]*perfv1.WindowStatus{}
	var rounds []int32
	for i := range exp.Status.Windows {
		w := &exp.Status.Windows[i]
		if w.Stage != stage || w.Round == nil || w.Series == nil || w.Valid == nil || !*w.Valid {
			continue
		}
		if len(byRound[*w.Round]) == 0 {
			rounds = append(rounds, *w.Round)
		}
		byRound[*w.Round] = append(byRound[*w.Round], w)
	}
	for _, r := range rounds {
		if len(byRound[r]) == 2 {
			out = append(out, byRound[r]...)
		}
	}
	return out
}

// exportSamples writes, per stage, the baseline and treatment windows the
// operator's analysis reads (the last of each), so analyze recomputes its table.
func exportSamples(w *csv.Writer, exp *perfv1.PerfExperiment) (int, error) {
	if err := w.Write(samplesHeader); err != nil {
		return 0, err
	}
	n := 0
	for s := range exp.Spec.Stages {
		for _, win := range exportedWindows(exp, int32(s)) {
			v := string(win.Variant)
			if win.Round != nil {
				v += ":r" + strconv.Itoa(int(*win.Round)+1)
			}
			if win.Arm != "" {
				v += "@" + win.Arm
			}
			ser, err := win.Series.Values()
			if err != nil {
				return n, fmt.Errorf("stage %s %s window: %w", exp.Spec.StageName(s), v, err)
			}
			for i := range ser.CPUMillicores {
				if i >= len(ser.MemoryBytes) {
					break
				}
				t := float64(i) * float64(win.Series.StepSeconds)
				if err := w.Write([]string{exp.Spec.StageName(s), v, ftoa(t), "all",
					ftoa(float64(ser.CPUMillicores[i]) / 1000), strconv.FormatInt(ser.MemoryBytes[i], 10)}); err != nil {
					return n, err
				}
				n++
			}
		}
	}
	if n == 0 {
		return 0, fmt.Errorf("perfexperiment %s/%s has no measured window yet", exp.Namespace, exp.Name)
	}
	return n, nil
}

// exportTrace writes the memory of every window with a series, in time order,
// and returns the offset of the first toggle: the start of the first window
// after a baseline, where the toggle is applied.
func exportTrace(w *csv.Writer, exp *perfv1.PerfExperiment) (int, *float64, error) {
	st := &exp.Status
	if st.StartTime == nil {
		return 0, nil, fmt.Errorf("perfexperiment %s/%s has not started", exp.Namespace, exp.Name)
	}
	limit := ""
	if m := st.Measurement; m != nil && m.MemoryLimitBytes > 0 {
		limit = strconv.FormatInt(m.MemoryLimitBytes*int64(max(m.Replicas, 1)), 10)
	}
	type row struct {
		t   float64
		rec []string
	}
	var rows []row
	var toggleAt *float64
	sawBaseline := false
	for _, win := range st.Windows {
		if win.Start == nil {
			continue
		}
		start := win.Start.Sub(st.StartTime.Time).Seconds()
		if sawBaseline && toggleAt == nil && win.Variant != perfv1.VariantBaseline {
			toggleAt = &start
		}
		sawBaseline = sawBaseline || win.Variant == perfv1.VariantBaseline
		if win.Series == nil {
			continue
		}
		ser, err := win.Series.Values()
		if err != nil {
			return 0, nil, fmt.Errorf("window %d %s: %w", win.Stage, win.Variant, err)
		}
		for i := range ser.MemoryBytes {
			t := start + float64(i+1)*float64(win.Series.StepSeconds)
			heap := ""
			if len(ser.HeapBytes) == len(ser.MemoryBytes) {
				heap = strconv.FormatInt(ser.HeapBytes[i], 10)
			}
			rows = append(rows, row{t: t, rec: []string{ftoa(t), "all", strconv.FormatInt(ser.MemoryBytes[i], 10), heap, limit}})
		}
	}
	if len(rows) == 0 {
		return 0, nil, fmt.Errorf("perfexperiment %s/%s has no recorded series yet", exp.Namespace, exp.Name)
	}
	sort.SliceStable(rows, func(i, k int) bool { return rows[i].t < rows[k].t })
	if err := w.Write(traceHeader); err != nil {
		return 0, nil, err
	}
	for _, r := range rows {
		if err := w.Write(r.rec); err != nil {
			return 0, nil, err
		}
	}
	return len(rows), toggleAt, nil
}

func lastWindow(ws []perfv1.WindowStatus, stage int32, v perfv1.Variant, arm string) *perfv1.WindowStatus {
	for i := len(ws) - 1; i >= 0; i-- {
		if ws[i].Stage == stage && ws[i].Variant == v && ws[i].Arm == arm {
			return &ws[i]
		}
	}
	return nil
}

func ftoa(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
