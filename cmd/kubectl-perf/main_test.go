package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// run executes the plugin with args and returns its output.
func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := &bytes.Buffer{}
	root := newRoot()
	root.SetOut(cmd)
	root.SetErr(cmd)
	root.SetArgs(args)
	err := root.Execute()
	return cmd.String(), err
}

// writeTrace writes the seed's JVM: a 1.2→3.9 GB sawtooth with one GC a minute,
// two pods, 15 s samples, and from leakAt on (if ≥ 0) +700 MB/min retained.
func writeTrace(t *testing.T, minutes int, leakAt float64) string {
	var b strings.Builder
	b.WriteString("t_seconds,pod,working_set_bytes,heap_bytes,limit_bytes\n")
	for s := 0.0; s <= float64(minutes*60); s += 15 {
		for i, pod := range []string{"cf-0", "cf-1"} {
			phase := math.Mod(s+float64(i)*20, 60) / 60
			heap := 1.2e9 + phase*2.7e9
			if leakAt >= 0 && s > leakAt {
				heap += (s - leakAt) / 60 * 700e6
			}
			heapCol := fmt.Sprintf("%.0f", heap)
			if i == 1 {
				heapCol = "" // a pod without a heap metric: the working set is watched
			}
			fmt.Fprintf(&b, "%.0f,%s,%.0f,%s,%d\n", s, pod, heap+400e6, heapCol, int64(12)<<30)
		}
	}
	p := filepath.Join(t.TempDir(), "trace.csv")
	if err := os.WriteFile(p, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestGuardCatchesTheDeathSpiralAndSparesTheSawtooth(t *testing.T) {
	for _, tc := range []struct {
		name   string
		leakAt float64
		abort  bool
	}{
		{"memory tracking switched on at 20 min", 1200, true},
		{"healthy sawtooth", -1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := run(t, "guard", "--trace", writeTrace(t, 40, tc.leakAt), "--toggle-at", "1200",
				"-f", filepath.Join("..", "..", "examples", "death-spiral.yaml"))
			if err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			var res struct {
				Abort     bool     `json:"abort"`
				AtSeconds *float64 `json:"atSeconds"`
				Reason    string   `json:"reason"`
			}
			if err := json.Unmarshal([]byte(out), &res); err != nil || strings.Count(strings.TrimSpace(out), "\n") != 0 {
				t.Fatalf("want one JSON line, got %q (%v)", out, err)
			}
			if res.Abort != tc.abort {
				t.Fatalf("abort %v: %s", res.Abort, out)
			}
			if tc.abort {
				if res.AtSeconds == nil || *res.AtSeconds-1200 > 120 || !strings.Contains(res.Reason, "MiB/min") {
					t.Fatalf("abort too late or unexplained: %s", out)
				}
				t.Logf("aborted %.0f s after the toggle: %s", *res.AtSeconds-1200, res.Reason)
			} else if res.AtSeconds != nil {
				t.Fatalf("atSeconds set without an abort: %s", out)
			}
		})
	}
}

func TestGuardRefusesBadInput(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.csv")
	_ = os.WriteFile(bad, []byte("t,pod\n1,a\n"), 0o600)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"guard", "--trace", bad, "--toggle-at", "0"}, "header is"},
		{[]string{"guard", "--trace", writeTrace(t, 5, -1)}, "--toggle-at is required"},
		{[]string{"guard", "--trace", writeTrace(t, 5, -1), "--toggle-at", "0", "-f", "/nonexistent.yaml"}, "no such file"},
	} {
		if out, err := run(t, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: want an error with %q, got %v %s", tc.args, tc.want, err, out)
		}
	}
}

// writeSamples writes two stages of AR(1)-noisy CPU and memory for two pods,
// the treatment costing +4 % CPU and +2 % memory.
func writeSamples(t *testing.T) string {
	r := rand.New(rand.NewPCG(1, 2))
	var b strings.Builder
	b.WriteString("stage,variant,t_seconds,pod,cpu_cores,memory_bytes\n")
	for _, stage := range []string{"500", "1000"} {
		for _, v := range []string{"baseline", "treatment"} {
			cpuF, memF := 1.0, 1.0
			if v == "treatment" {
				cpuF, memF = 1.04, 1.02
			}
			noise := 0.0
			for s := 0; s < 120; s++ {
				noise = 0.5*noise + r.NormFloat64()*0.01
				for _, pod := range []string{"a", "b"} {
					fmt.Fprintf(&b, "%s,%s,%d,%s,%.4f,%.0f\n", stage, v, s*15, pod, 0.8*cpuF*(1+noise), 2.1e9*memF*(1+noise/5))
				}
			}
		}
	}
	p := filepath.Join(t.TempDir(), "samples.csv")
	if err := os.WriteFile(p, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestAnalyzeJSONAndTable(t *testing.T) {
	path := writeSamples(t)
	out, err := run(t, "analyze", "--samples", path, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var res analyzeJSON
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(res.Stages) != 2 || res.Stages[0].Stage != "500" || res.Stages[1].Stage != "1000" {
		t.Fatalf("stages: %s", out)
	}
	for _, s := range res.Stages {
		cpu, mem := s.Metrics["cpu"], s.Metrics["memory"]
		if math.Abs(cpu.Overhead-0.04) > 0.02 || cpu.CILow > cpu.Overhead || cpu.CIHigh < cpu.Overhead {
			t.Errorf("stage %s cpu %+v", s.Stage, cpu)
		}
		if math.Abs(mem.Overhead-0.02) > 0.01 || mem.Baseline < 4e9 {
			t.Errorf("stage %s memory %+v (pods are summed)", s.Stage, mem)
		}
	}
	table, err := run(t, "analyze", "--samples", path, "-o", "table")
	if err != nil || !strings.Contains(table, "95% CI") || !strings.Contains(table, "cores") {
		t.Fatalf("table: %v\n%s", err, table)
	}
	if _, err := run(t, "analyze", "--samples", path, "-o", "yaml"); err == nil {
		t.Fatal("-o yaml accepted")
	}
}
