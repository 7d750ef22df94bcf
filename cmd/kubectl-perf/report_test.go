package main

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	imgpng "image/png"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
	"perfexp.dev/perf-operator/internal/testenv"
)

// The control plane is started by the first test that needs it and stopped by
// TestMain, so the offline tests run without it. Missing binaries fail the test.
var (
	clusterOnce sync.Once
	clusterEnv  *testenv.Env
	clusterErr  error
	kubeconfig  string
	k8s         client.Client
)

func TestMain(m *testing.M) {
	code := m.Run()
	if clusterEnv != nil {
		if err := clusterEnv.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping envtest:", err)
		}
	}
	if kubeconfig != "" {
		_ = os.RemoveAll(filepath.Dir(kubeconfig))
	}
	if pluginDir != "" {
		_ = os.RemoveAll(pluginDir)
	}
	os.Exit(code)
}

// cluster starts the control plane once and returns an admin client; the plugin
// reaches it through a kubeconfig for a system:masters user.
func cluster(t *testing.T) client.Client {
	t.Helper()
	clusterOnce.Do(func() {
		clusterEnv, clusterErr = testenv.Start()
		if clusterErr != nil {
			return
		}
		var dir string
		if dir, clusterErr = os.MkdirTemp("", "kubectl-perf-test"); clusterErr != nil {
			return
		}
		if kubeconfig, clusterErr = clusterEnv.AdminKubeconfig(dir, "perf-admin"); clusterErr != nil {
			return
		}
		k8s, clusterErr = client.New(clusterEnv.Config, client.Options{})
	})
	if clusterErr != nil {
		t.Fatalf("envtest control plane: %v", clusterErr)
	}
	return k8s
}

// kubectl runs the plugin against the test cluster.
func kubectl(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return run(t, append(args, "--kubeconfig", kubeconfig)...)
}

var (
	fixturesOnce sync.Once
	fixturesErr  error
)

// fixtures creates, once, the example experiment finished (Succeeded, Pass, three
// stages) as "profiling-overhead" and aborted in stage 2 as "profiling-aborted",
// both in namespace default.
func fixtures(t *testing.T) {
	t.Helper()
	c := cluster(t)
	fixturesOnce.Do(func() {
		t0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
		for name, aborted := range map[string]bool{"profiling-overhead": false, "profiling-aborted": true} {
			exp := newExample(t, name)
			if fixturesErr = c.Create(context.Background(), exp); fixturesErr != nil {
				return
			}
			exp.Status = finishedStatus(t0, aborted)
			if fixturesErr = c.Status().Update(context.Background(), exp); fixturesErr != nil {
				fixturesErr = fmt.Errorf("%s status: %w", name, fixturesErr)
				return
			}
		}
	})
	if fixturesErr != nil {
		t.Fatal(fixturesErr)
	}
}

func newExample(t *testing.T, name string) *perfv1.PerfExperiment {
	t.Helper()
	exp, err := loadExperiment(filepath.Join("..", "..", "examples", "profiling-overhead.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	exp.Name, exp.Namespace = name, "default"
	return exp
}

func get(t *testing.T, name string) *perfv1.PerfExperiment {
	t.Helper()
	exp := &perfv1.PerfExperiment{}
	if err := cluster(t).Get(context.Background(), client.ObjectKey{Namespace: "default", Name: name}, exp); err != nil {
		t.Fatal(err)
	}
	return exp
}

// finishedStatus is the example's run as the operator records it: 2 pods of
// 2 cores / 4 GiB, warm-up 5m, per stage a 30m baseline, 2m settle, 30m treatment
// and 2m settle, series of 20 points 90 s apart. Profiling on costs about 4 % CPU,
// 60 MiB and 5 % p99. Aborted, the run stops 7.5 minutes into stage 2's treatment
// on a heap leak.
func finishedStatus(t0 time.Time, aborted bool) perfv1.PerfExperimentStatus {
	const (
		mib      = 1 << 20
		step     = 90
		points   = 20
		cpuLimit = 4.0 // cores, both pods
		memLimit = 8 << 30
	)
	rng := rand.New(rand.NewPCG(1, 2))
	at := func(min float64) *metav1.Time {
		return ptr.To(metav1.NewTime(t0.Add(time.Duration(min * float64(time.Minute)))))
	}
	st := perfv1.PerfExperimentStatus{
		ObservedGeneration: 1,
		StartTime:          at(0),
		MetricsSource:      perfv1.MetricsSource("prometheus"),
		Measurement:        &perfv1.MeasurementStatus{Replicas: 2, CPULimitCores: 2, MemoryLimitBytes: 4 << 30},
	}
	load := func(qps int32, min, p99 float64) *perfv1.LoadResult {
		n := int64(float64(qps) * min * 60)
		return &perfv1.LoadResult{Requests: n, Failures: n / 5000, AchievedQPS: float64(qps) * 0.998,
			P50Ms: p99 / 4, P95Ms: p99 / 1.6, P99Ms: p99}
	}
	st.Windows = append(st.Windows, perfv1.WindowStatus{Stage: -1, QPS: 50, Variant: perfv1.VariantWarmup,
		Job: "profiling-warmup", Start: at(0), End: at(5), Load: load(50, 5, 14), Valid: ptr.To(true)})
	type means struct{ cpu, mem, heap, p99 float64 }
	window := func(stage int32, qps int32, v perfv1.Variant, from float64, n int, cpu, mem, heap, p99, leak float64) (perfv1.WindowStatus, means) {
		s := &perfv1.WindowSeries{StepSeconds: step}
		var vals perfv1.SeriesValues
		var m means
		for i := range n {
			c := cpu * (1 + 0.03*rng.NormFloat64())
			w := mem + 15*mib*rng.NormFloat64() + leak*float64(i)
			// A JVM heap sawtooth: a GC about every 6 minutes.
			h := heap*(0.75+0.5*math.Mod(float64(i)*step/360, 1)) + leak*float64(i)
			vals.CPUMillicores = append(vals.CPUMillicores, int64(c*1000))
			vals.MemoryBytes = append(vals.MemoryBytes, int64(w))
			vals.HeapBytes = append(vals.HeapBytes, int64(h))
			m.cpu += float64(int64(c*1000)) / 1000 / float64(n)
			m.mem += float64(int64(w)) / float64(n)
			m.heap += float64(int64(h)) / float64(n)
		}
		m.p99 = p99
		s.SetValues(vals)
		dur := float64(n*step) / 60
		name := fmt.Sprintf("profiling-s%d-%s", stage, v)
		return perfv1.WindowStatus{Stage: stage, QPS: qps, Variant: v, Job: name, Start: at(from), End: at(from + dur),
			Load: load(qps, dur, p99), Series: s, Valid: ptr.To(true),
			Resources: &perfv1.ResourceAggregates{Samples: int32(n), CPUCores: m.cpu, CPUPercentOfLimit: m.cpu / cpuLimit * 100,
				MemoryBytes: int64(m.mem), MemoryPercentOfLimit: m.mem / memLimit * 100, HeapBytes: ptr.To(int64(m.heap))}}, m
	}
	compare := func(b, tr, limit, halfCI, criterion float64) *perfv1.MetricComparison {
		o := tr/b - 1
		c := &perfv1.MetricComparison{Baseline: b, Treatment: tr, Delta: tr - b, Overhead: o,
			CILow: o - halfCI, CIHigh: o + halfCI, Significant: o-halfCI > 0, Material: o > criterion}
		if limit > 0 {
			c.DeltaPercentOfLimit = ptr.To((tr - b) / limit * 100)
		}
		return c
	}
	settle := func(stage, qps int32, from float64) perfv1.WindowStatus {
		return perfv1.WindowStatus{Stage: stage, QPS: qps, Variant: perfv1.VariantSettle, Start: at(from), End: at(from + 2)}
	}
	stages := []struct {
		qps                int32
		cpu, mem, heap, ms float64
	}{{500, 0.82, 2150 * mib, 1100 * mib, 18.4}, {1000, 1.55, 2380 * mib, 1350 * mib, 24.9}, {2000, 2.9, 2710 * mib, 1700 * mib, 41.2}}
	now := 5.0
	for i, sg := range stages {
		stage := int32(i)
		bw, b := window(stage, sg.qps, perfv1.VariantBaseline, now, points, sg.cpu, sg.mem, sg.heap, sg.ms, 0)
		st.Windows = append(st.Windows, bw, settle(stage, sg.qps, now+30))
		now += 32
		if aborted && i == 1 {
			// Profiling at this rate leaks: +500 MiB/min retained over both pods,
			// aborted after 5 samples.
			tw, _ := window(stage, sg.qps, perfv1.VariantTreatment, now, 5, sg.cpu*1.3, sg.mem, sg.heap, sg.ms*1.4, 500*mib*step/60)
			st.Windows = append(st.Windows, tw)
			abortAt := tw.End
			st.Phase, st.Verdict, st.CurrentStage, st.StageIndex = perfv1.PhaseAborted, perfv1.VerdictInconclusive, "2/3 (1000qps)", ptr.To(stage)
			st.Abort = &perfv1.AbortStatus{Reason: "HeapGrowth", At: *abortAt,
				Message: "pod mall-gateway-7c9d-0: heap +251 MiB/min, limit 100 MiB/min; projected to reach the memory limit (4 GiB) in 6m"}
			st.CompletionTime = at(now + 9)
			st.Overhead = &perfv1.OverheadColumns{CPU: "+4.0%", Memory: "+2.8%", P99: "+5.2%"}
			return st
		}
		tw, tr := window(stage, sg.qps, perfv1.VariantTreatment, now, points, sg.cpu*1.03, sg.mem+60*mib, sg.heap*1.05, sg.ms*1.05, 0)
		st.Windows = append(st.Windows, tw)
		now += 30
		if i < len(stages)-1 {
			st.Windows = append(st.Windows, settle(stage+1, stages[i+1].qps, now))
			now += 2
		}
		st.Summary = append(st.Summary, perfv1.StageSummary{
			Stage: fmt.Sprintf("%dqps", sg.qps), QPS: sg.qps, Trustworthy: true, Verdict: perfv1.VerdictPass,
			CPU:    compare(b.cpu, tr.cpu, cpuLimit, 0.012, 0.05),
			Memory: compare(b.mem, tr.mem, memLimit, 0.006, 0.05),
			Heap:   compare(b.heap, tr.heap, 0, 0.02, 1),
			P99:    compare(b.p99, tr.p99, 0, 0.03, 0.10),
		})
	}
	st.Phase, st.Verdict, st.CurrentStage, st.StageIndex = perfv1.PhaseSucceeded, perfv1.VerdictPass, "3/3 (2000qps)", ptr.To(int32(2))
	st.CompletionTime = at(now + 1)
	st.Overhead = &perfv1.OverheadColumns{CPU: "+4.1%", Memory: "+2.8%", P99: "+5.0%"}
	return st
}

func TestReportTable(t *testing.T) {
	fixtures(t)
	out, err := kubectl(t, "report", "profiling-overhead", "-n", "default")
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	t.Log("\n" + out)
	if !strings.HasPrefix(out, "perfexperiment default/profiling-overhead: phase Succeeded, verdict Pass\n") {
		t.Errorf("header missing: %q", out)
	}
	for _, col := range []string{"CPU (cores)", "MEMORY (MiB)", "P99 (ms)", "95% CI", "VERDICT"} {
		if !strings.Contains(out, col) {
			t.Errorf("column %q missing", col)
		}
	}
	for _, stage := range []string{"500qps", "1000qps", "2000qps"} {
		var row string
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, stage+" ") {
				row = l
			}
		}
		if row == "" {
			t.Errorf("no row for stage %s", stage)
			continue
		}
		if strings.Count(row, "→") != 3 || !strings.Contains(row, " pp)") || !strings.HasSuffix(strings.TrimSpace(row), "Pass") {
			t.Errorf("stage %s row incomplete: %q", stage, row)
		}
	}

	// Aborted: the header says why; the completed stage is still reported.
	out, err = kubectl(t, "report", "profiling-aborted", "-n", "default")
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if !strings.Contains(out, "phase Aborted, verdict Inconclusive") || !strings.Contains(out, "HeapGrowth: pod mall-gateway-7c9d-0: heap +251 MiB/min") ||
		!strings.Contains(out, "500qps") || strings.Contains(out, "1000qps ") {
		t.Errorf("aborted report: %s", out)
	}
}

func TestReportJSON(t *testing.T) {
	fixtures(t)
	for _, name := range []string{"profiling-overhead", "profiling-aborted"} {
		// No -n: the kubeconfig's context has no namespace, so "default" is used.
		out, err := kubectl(t, "report", name, "-o", "json")
		if err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		var got reportJSON
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		exp := get(t, name)
		want := reportJSON{Name: name, Namespace: "default", Phase: exp.Status.Phase, Verdict: exp.Status.Verdict,
			Abort: exp.Status.Abort, Stages: exp.Status.Summary}
		if got.Abort != nil { // JSON keeps seconds only, as the apiserver does
			want.Abort.At = metav1.NewTime(want.Abort.At.Time)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: json differs from status\n got %+v\nwant %+v", name, got, want)
		}
		if len(got.Stages) == 0 || got.Stages[0].CPU == nil || got.Stages[0].CPU.DeltaPercentOfLimit == nil {
			t.Errorf("%s: stages not as stored: %s", name, out)
		}
	}
}

// svgInfo is what a plot contains, read back with encoding/xml.
type svgInfo struct {
	texts   []string
	classes map[string]int
	lines   int
}

func parseSVG(t *testing.T, path string) svgInfo {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	info := svgInfo{classes: map[string]int{}}
	dec := xml.NewDecoder(f)
	var root string
	var inText bool
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s is not well-formed XML: %v", path, err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = tok.Name.Local
			}
			inText = tok.Name.Local == "text"
			for _, a := range tok.Attr {
				if a.Name.Local == "class" {
					info.classes[tok.Name.Local+"."+a.Value]++
				}
			}
			if tok.Name.Local == "polyline" {
				info.lines++
			}
		case xml.CharData:
			if inText {
				info.texts = append(info.texts, string(tok))
			}
		case xml.EndElement:
			inText = false
		}
	}
	if root != "svg" {
		t.Fatalf("root element is %q, want svg", root)
	}
	return info
}

func TestReportPlot(t *testing.T) {
	fixtures(t)
	for _, tc := range []struct {
		name  string
		abort bool
	}{{"profiling-overhead", false}, {"profiling-aborted", true}} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), tc.name+".svg")
			out, err := kubectl(t, "report", tc.name, "-n", "default", "--plot", path)
			if err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			info := parseSVG(t, path)
			all := strings.Join(info.texts, "\n")
			for _, label := range []string{"CPU (cores)", "Memory, working set (MiB)", "Heap in use (MiB)", "p99 latency per window (ms)",
				"time since the experiment's start (minutes)", "baseline (toggle off)", "treatment (toggle on)", "toggle applied",
				"memory limit (2 pods)", "s1 500qps baseline", "s1 500qps treatment", "s2 1000qps treatment", "warm-up 50qps"} {
				if !strings.Contains(all, label) {
					t.Errorf("label %q missing", label)
				}
			}
			// The overhead panel names every summarised stage and the three metrics.
			stages := 3
			if tc.abort {
				stages = 1
			}
			for _, label := range []string{"overhead per stage (%, 95% interval)", "500qps", "CPU", "memory", "p99"} {
				if !strings.Contains(all, label) {
					t.Errorf("overhead panel: label %q missing", label)
				}
			}
			if got := strings.Contains(all, "2000qps\n") || strings.HasSuffix(all, "2000qps"); got != (stages == 3) {
				t.Errorf("overhead panel names stage 2000qps: %v, want %v", got, stages == 3)
			}
			if got := strings.Contains(all, "aborted: HeapGrowth"); got != tc.abort {
				t.Errorf("abort marker present %v, want %v", got, tc.abort)
			}
			// The same plot as PNG: an image of the plot's size.
			png := filepath.Join(t.TempDir(), tc.name+".png")
			if out, err := kubectl(t, "report", tc.name, "-n", "default", "--plot", png); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			f, err := os.Open(png)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			img, err := imgpng.Decode(f)
			if err != nil {
				t.Fatalf("%s is not a PNG: %v", png, err)
			}
			if dir := os.Getenv("KUBECTL_PERF_KEEP_PLOT"); dir != "" {
				for _, p := range []string{path, png} {
					b, _ := os.ReadFile(p)
					_ = os.WriteFile(filepath.Join(dir, filepath.Base(p)), b, 0o644)
				}
			}
			if b := img.Bounds(); b.Dx() < 1000 || b.Dy() < 4*b.Dx()/5 {
				t.Errorf("PNG is %dx%d", b.Dx(), b.Dy())
			}
		})
	}
	if _, err := kubectl(t, "report", "profiling-overhead", "-n", "default", "--plot", filepath.Join(t.TempDir(), "x.pdf")); err == nil ||
		!strings.Contains(err.Error(), ".svg or .png") {
		t.Errorf("--plot x.pdf: %v", err)
	}
}

func TestReportWithoutResults(t *testing.T) {
	c := cluster(t)
	exp := newExample(t, "not-started")
	if err := c.Create(context.Background(), exp); err != nil {
		t.Fatal(err)
	}
	out, err := kubectl(t, "report", "not-started", "-n", "default")
	if err == nil || err.Error() != "experiment default/not-started has no results yet (phase Pending)" {
		t.Fatalf("want a no-results error, got %v: %s", err, out)
	}
	_, err = kubectl(t, "report", "missing", "-n", "default")
	if err == nil || !strings.Contains(err.Error(), "perfexperiment default/missing not found") {
		t.Fatalf("want not found naming the object, got %v", err)
	}
}

func TestAbort(t *testing.T) {
	c := cluster(t)
	exp := newExample(t, "to-abort")
	if err := c.Create(context.Background(), exp); err != nil {
		t.Fatal(err)
	}
	out, err := kubectl(t, "abort", "to-abort", "-n", "default")
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if out != "perfexperiment default/to-abort: abort requested\n" {
		t.Errorf("output %q", out)
	}
	if got := get(t, "to-abort"); !got.Spec.Abort {
		t.Errorf("spec.abort not set: %+v", got.Spec)
	}

	out, err = kubectl(t, "abort", "nope", "-n", "default")
	if err == nil || !strings.Contains(err.Error(), "perfexperiment default/nope not found") {
		t.Fatalf("want not found naming the object, got %v: %s", err, out)
	}
	if _, err := kubectl(t, "abort"); err == nil {
		t.Fatal("abort without a name succeeded")
	}
}

// sweepFixture is a load-only concurrency sweep as the operator records it:
// four stages, a knee at c8.
func sweepFixture(t *testing.T) {
	t.Helper()
	c := cluster(t)
	exp := newExample(t, "lucee-sweep")
	exp.Spec.Toggle, exp.Spec.SuccessCriteria = nil, nil
	exp.Spec.Stages = []perfv1.StageSpec{{Concurrency: 1}, {Concurrency: 2}, {Concurrency: 4}, {Concurrency: 8}}
	if err := c.Create(context.Background(), exp); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	at := func(min int) *metav1.Time { return ptr.To(metav1.NewTime(t0.Add(time.Duration(min) * time.Minute))) }
	rates := []float64{150, 290, 330, 335}
	for i, r := range rates {
		vus := exp.Spec.Stages[i].Concurrency
		exp.Status.Windows = append(exp.Status.Windows, perfv1.WindowStatus{Stage: int32(i), Concurrency: vus, Variant: perfv1.VariantBaseline,
			Start: at(3 * i), End: at(3*i + 2), Valid: ptr.To(true),
			Load: &perfv1.LoadResult{Requests: int64(r * 120), AchievedQPS: r, P50Ms: 3 * float64(vus), P95Ms: 5 * float64(vus), P99Ms: 6 * float64(vus)}})
		cores := r / 400
		exp.Status.Curve = append(exp.Status.Curve, perfv1.CurvePoint{Stage: fmt.Sprintf("c%d", vus), Concurrency: vus, AchievedQPS: r,
			P50Ms: 3 * float64(vus), P95Ms: 5 * float64(vus), P99Ms: 6 * float64(vus), ErrorPercent: float64(i) * 0.5,
			CPUCores: &cores, MemoryBytes: ptr.To(int64(900 << 20)), Valid: i < 3})
	}
	exp.Status.Knee = &perfv1.KneeStatus{Stage: "c4", Index: 2, CapacityQPS: 335, Reason: "stage c4 achieved 330.0 req/s of the 580.0 that 4 users reach at stage c2's rate per user (43 % short; spec.knee.rateShortfall 10 %)"}
	exp.Status.Phase, exp.Status.StartTime, exp.Status.CompletionTime = perfv1.PhaseSucceeded, at(0), at(12)
	if err := c.Status().Update(context.Background(), exp); err != nil {
		t.Fatal(err)
	}
}

func TestReportSweep(t *testing.T) {
	sweepFixture(t)
	out, err := kubectl(t, "report", "lucee-sweep", "-n", "default")
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	t.Log("\n" + out)
	for _, want := range []string{
		"perfexperiment default/lucee-sweep: phase Succeeded, verdict -\n",
		"STAGE", "LOAD", "ACHIEVED (req/s)", "P99 (ms)", "ERRORS", "CPU (cores)",
		"knee: stage c4, capacity about 335.0 req/s: stage c4 achieved 330.0 req/s",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	rows := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			rows[f[0]] = l
		}
	}
	for stage, want := range map[string][]string{
		"c1": {"1 users", "150.0", "6.0", "0.00%", "0.375", "900"},
		"c4": {"4 users", "330.0", "24.0", "1.00%", "← knee"},
		"c8": {"8 users", "335.0", "48.0", "1.50%", "(load short or samples missing)"},
	} {
		for _, w := range want {
			if !strings.Contains(rows[stage], w) {
				t.Errorf("row %s lacks %q: %q", stage, w, rows[stage])
			}
		}
	}
	if strings.Contains(out, "overhead") || strings.Contains(out, "no stage completed") {
		t.Errorf("a sweep has no overhead table: %s", out)
	}
	path := filepath.Join(t.TempDir(), "sweep.svg")
	if out, err := kubectl(t, "report", "lucee-sweep", "-n", "default", "--plot", path); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	all := strings.Join(parseSVG(t, path).texts, "\n")
	for _, label := range []string{"throughput per stage", "p99 latency per stage", "concurrency (virtual users)", "achieved (req/s)",
		"knee: stage c4 (capacity 335 req/s)", "s3 c4 baseline"} {
		if !strings.Contains(all, label) {
			t.Errorf("plot label %q missing", label)
		}
	}
}

// With variants, each row names its variant and the intervals are labelled
// with the corrected confidence.
func TestReportVariants(t *testing.T) {
	cmp := func(b, tr float64) *perfv1.MetricComparison {
		return &perfv1.MetricComparison{Baseline: b, Treatment: tr, Delta: tr - b, Overhead: tr/b - 1, CILow: tr/b - 1.02, CIHigh: tr/b - 0.98}
	}
	exp := &perfv1.PerfExperiment{}
	exp.Namespace, exp.Name = "perf-demo", "jvm-gc-variants"
	exp.Spec.Variants = []perfv1.ArmSpec{{Name: "g1"}, {Name: "serial"}, {Name: "parallel"}}
	exp.Spec.Variants[0].Toggle.JVMOption = "-XX:+UseG1GC"
	exp.Status.Phase, exp.Status.Verdict = perfv1.PhaseSucceeded, perfv1.VerdictNoEffect
	for i, v := range []string{"g1", "serial", "parallel"} {
		exp.Status.Summary = append(exp.Status.Summary, perfv1.StageSummary{Stage: "50", QPS: 50, Variant: v, Confidence: 1 - 0.05/3,
			CPU: cmp(0.2, 0.2+0.01*float64(i)), Memory: cmp(200<<20, float64(200+10*i)*(1<<20)), P99: cmp(10, 11), GC: cmp(0.004, 0.004*float64(1+i)), Trustworthy: true, Verdict: perfv1.VerdictNoEffect})
	}
	var out strings.Builder
	if err := printReport(&out, exp); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
	for _, want := range []string{"STAGE  VARIANT", "CPU OVERHEAD (98.3% CI)", "intervals at 98.3% each (Bonferroni)", "time in GC (all pods): 50 g1 4.0 → 4.0 ms/s, +0.0% [-2.0, +2.0]; 50 serial 4.0 → 8.0 ms/s, +100.0% [+98.0, +102.0]"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q", want)
		}
	}
	for _, v := range []string{"g1", "serial", "parallel"} {
		found := false
		for _, l := range strings.Split(out.String(), "\n") {
			if f := strings.Fields(l); len(f) > 2 && f[0] == "50" && f[1] == v {
				found = true
			}
		}
		if !found {
			t.Errorf("no row for variant %s", v)
		}
	}
}
