package main

import (
	"context"
	"encoding/json"
	"math"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// export writes the samples analyze reads: each stage's baseline and treatment
// means come back exactly as the series in the object hold them.
func TestExportSamplesRoundTripThroughAnalyze(t *testing.T) {
	fixtures(t)
	path := filepath.Join(t.TempDir(), "samples.csv")
	out, err := kubectl(t, "export", "profiling-overhead", "-n", "default", "--samples", path)
	if err != nil || !strings.Contains(out, "wrote 120 samples to "+path) {
		t.Fatalf("export: %v: %s", err, out)
	}
	out, err = run(t, "analyze", "--samples", path, "-o", "json")
	if err != nil {
		t.Fatalf("analyze: %v: %s", err, out)
	}
	var res analyzeJSON
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	exp := get(t, "profiling-overhead")
	if len(res.Stages) != len(exp.Spec.Stages) {
		t.Fatalf("analyze found %d stages, want %d", len(res.Stages), len(exp.Spec.Stages))
	}
	mean := func(v []int64, scale float64) float64 {
		s := 0.0
		for _, x := range v {
			s += float64(x) * scale
		}
		return s / float64(len(v))
	}
	for i, st := range res.Stages {
		if st.Stage != exp.Spec.StageName(i) {
			t.Errorf("stage %d named %q, want %q", i, st.Stage, exp.Spec.StageName(i))
		}
		b, err := lastWindow(exp.Status.Windows, int32(i), "baseline", "").Series.Values()
		if err != nil {
			t.Fatal(err)
		}
		tr, err := lastWindow(exp.Status.Windows, int32(i), "treatment", "").Series.Values()
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			metric    string
			got, want float64
		}{
			{"cpu baseline", st.Metrics["cpu"].Baseline, mean(b.CPUMillicores, 1.0/1000)},
			{"cpu treatment", st.Metrics["cpu"].Treatment, mean(tr.CPUMillicores, 1.0/1000)},
			{"memory baseline", st.Metrics["memory"].Baseline, mean(b.MemoryBytes, 1)},
			{"memory treatment", st.Metrics["memory"].Treatment, mean(tr.MemoryBytes, 1)},
		} {
			if math.Abs(c.got-c.want) > 1e-9*math.Abs(c.want) {
				t.Errorf("stage %s %s: analyze %v, series %v", st.Stage, c.metric, c.got, c.want)
			}
		}
	}
}

// export writes the trace guard reads, and names the toggle's second: replayed
// through the example's guardrails, a run whose treatment leaked trips the
// heap guardrail, and the healthy run's trace trips none.
func TestExportTraceRoundTripThroughGuard(t *testing.T) {
	fixtures(t)
	c := cluster(t)
	leak := newExample(t, "export-leak")
	if err := c.Create(context.Background(), leak); err != nil {
		t.Fatal(err)
	}
	leak.Status = finishedStatus(time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC), false)
	// Stage 1's treatment retains 600 MiB more at every 90 s point.
	w := lastWindow(leak.Status.Windows, 0, "treatment", "").Series
	v, err := w.Values()
	if err != nil {
		t.Fatal(err)
	}
	for i := range v.HeapBytes {
		v.HeapBytes[i] += int64(i) * 600 << 20
		v.MemoryBytes[i] += int64(i) * 600 << 20
	}
	w.SetValues(v)
	if err := c.Status().Update(context.Background(), leak); err != nil {
		t.Fatal(err)
	}
	toggleAt := regexp.MustCompile(`--toggle-at (\d+(\.\d+)?)`)
	for name, abort := range map[string]bool{"export-leak": true, "profiling-overhead": false} {
		path := filepath.Join(t.TempDir(), "trace.csv")
		out, err := kubectl(t, "export", name, "-n", "default", "--trace", path)
		m := toggleAt.FindStringSubmatch(out)
		if err != nil || m == nil {
			t.Fatalf("export %s: %v: %s", name, err, out)
		}
		out, err = run(t, "guard", "--trace", path, "--toggle-at", m[1], "-f", filepath.Join("..", "..", "examples", "profiling-overhead.yaml"))
		if err != nil {
			t.Fatalf("guard on %s: %v: %s", name, err, out)
		}
		var res guardResult
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		if res.Abort != abort {
			t.Errorf("guard on %s's trace: %s; want abort %v", name, out, abort)
		}
	}
}

func TestExportNeedsAFile(t *testing.T) {
	if _, err := run(t, "export", "x"); err == nil || !strings.Contains(err.Error(), "--samples") {
		t.Fatalf("export without files: %v", err)
	}
}
