package main

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/spf13/cobra"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"

	"perfexp.dev/perf-operator/internal/guardrail"
	"perfexp.dev/perf-operator/internal/metrics"
)

var traceHeader = []string{"t_seconds", "pod", "working_set_bytes", "heap_bytes", "limit_bytes"}

// guardResult is the one JSON line `kubectl perf guard` prints.
type guardResult struct {
	// Experiment is namespace/name of the -f manifest's experiment.
	Experiment string   `json:"experiment,omitempty"`
	Abort      bool     `json:"abort"`
	AtSeconds  *float64 `json:"atSeconds"`
	Reason     string   `json:"reason"`
}

func guardCmd() *cobra.Command {
	var trace, manifest string
	var toggleAt float64
	var exitCode bool
	cmd := &cobra.Command{
		Use:   "guard --trace FILE.csv --toggle-at SECONDS [-f experiment.yaml] [--exit-code]",
		Short: "Replay a recorded memory trace against an experiment's guardrails",
		Long: `Replays a memory trace (CSV header t_seconds,pod,working_set_bytes,heap_bytes,limit_bytes;
heap_bytes may be empty; several pods' samples interleaved) through the operator's own
guardrails (the samples before --toggle-at teach them each pod's healthy pattern, as
the baseline window does in a run; the samples after it are judged) and prints one JSON line:
{"abort": true|false, "atSeconds": <number or null>, "reason": "..."}.
The sampling interval is taken from the trace's spacing. Without -f the defaults apply;
with -f, every PerfExperiment of the file (all its YAML documents) is replayed, one
line each, with "experiment": "namespace/name".

--exit-code exits 4 (as for an Aborted experiment) when a guardrail would have
aborted, 0 when none would (1 is any error).`,
		Example: `  kubectl perf guard --trace incident.csv --toggle-at 1200 -f examples/death-spiral.yaml --exit-code`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("toggle-at") {
				return fmt.Errorf("--toggle-at is required: the second of the trace at which the toggle was switched on")
			}
			exps, err := loadExperiments(manifest)
			if err != nil {
				return err
			}
			instants, err := readTrace(trace)
			if err != nil {
				return err
			}
			aborted := 0
			for _, exp := range exps {
				res, err := replay(exp, instants, toggleAt)
				if err != nil {
					return err
				}
				if manifest != "" {
					res.Experiment = exp.Namespace + "/" + exp.Name
				}
				if res.Abort {
					aborted++
				}
				if err := json.NewEncoder(cmd.OutOrStdout()).Encode(res); err != nil {
					return err
				}
			}
			if exitCode && aborted > 0 {
				return &exitError{code: ExitAborted, msg: fmt.Sprintf("guardrails would have aborted %d of %d experiments: exit code %d", aborted, len(exps), ExitAborted)}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&trace, "trace", "", "memory trace CSV (required)")
	cmd.Flags().Float64Var(&toggleAt, "toggle-at", 0, "second of the trace at which the toggle was switched on (required)")
	cmd.Flags().StringVarP(&manifest, "filename", "f", "", "PerfExperiment manifest whose guardrails to use, every document of it (default: the defaults)")
	cmd.Flags().BoolVar(&exitCode, "exit-code", false, "exit 4 when a guardrail would have aborted")
	_ = cmd.MarkFlagRequired("trace")
	return cmd
}

// instant is one moment of the trace: every pod's sample and the largest limit.
type instant struct {
	t       float64
	samples []metrics.Sample
	limit   float64
}

func replay(exp *perfv1.PerfExperiment, instants []instant, toggleAt float64) (guardResult, error) {
	cfg, err := guardrail.ConfigFrom(&exp.Spec)
	if err != nil {
		return guardResult{}, err
	}
	if step := medianStep(instants); step > 0 {
		cfg.Interval = step
	}
	var state guardrail.State
	for _, in := range instants {
		if in.t < toggleAt {
			// As the operator does with the baseline window: the samples
			// before the toggle teach the guardrail each pod's healthy
			// pattern; only those after it are judged.
			state.Record(cfg, in.samples, nil, in.samples[0].Time)
			continue
		}
		if b := state.Observe(cfg, in.samples, nil, in.limit, in.samples[0].Time); b != nil {
			at := in.t
			return guardResult{Abort: true, AtSeconds: &at, Reason: b.Message}, nil
		}
	}
	return guardResult{Reason: fmt.Sprintf("no guardrail tripped in %d samples after the toggle", countAfter(instants, toggleAt))}, nil
}

func readTrace(path string) ([]instant, error) {
	byT := map[float64]*instant{}
	err := csvRows(path, traceHeader, func(_ int, rec []string) error {
		t, _, err := number(rec, 0, "t_seconds", false)
		if err != nil {
			return err
		}
		ws, _, err := number(rec, 2, "working_set_bytes", false)
		if err != nil {
			return err
		}
		heap, ok, err := number(rec, 3, "heap_bytes", true)
		if err != nil {
			return err
		}
		if !ok {
			heap = math.NaN()
		}
		limit, _, err := number(rec, 4, "limit_bytes", true)
		if err != nil {
			return err
		}
		if rec[1] == "" {
			return fmt.Errorf("column pod is empty")
		}
		in := byT[t]
		if in == nil {
			in = &instant{t: t}
			byT[t] = in
		}
		when := time.Unix(0, 0).Add(time.Duration(t * float64(time.Second)))
		in.samples = append(in.samples, metrics.Sample{Time: when, Pod: rec[1], CPUCores: math.NaN(), WorkingSetBytes: ws, HeapBytes: heap, GCSecondsPerSecond: math.NaN()})
		in.limit = math.Max(in.limit, limit)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(byT) == 0 {
		return nil, fmt.Errorf("%s: no samples", path)
	}
	out := make([]instant, 0, len(byT))
	for _, in := range byT {
		out = append(out, *in)
	}
	sort.Slice(out, func(i, k int) bool { return out[i].t < out[k].t })
	return out, nil
}

// medianStep is the trace's typical sampling interval.
func medianStep(in []instant) time.Duration {
	var d []float64
	for i := 1; i < len(in); i++ {
		d = append(d, in[i].t-in[i-1].t)
	}
	if len(d) == 0 {
		return 0
	}
	sort.Float64s(d)
	return time.Duration(d[len(d)/2] * float64(time.Second))
}

func countAfter(in []instant, t float64) int {
	n := 0
	for _, i := range in {
		if i.t >= t {
			n++
		}
	}
	return n
}
