package k6

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
)

// These tests run the generated run.js with a real k6 (bin/k6, built from its Go
// module by hack/tools.sh) against a local HTTP server, with the command and
// environment BuildJob puts in the Job. Only the summary path differs: a file
// instead of /dev/termination-log.

// k6Binary returns bin/k6 or fails: a missing tool is an error, never a skip.
func k6Binary(t *testing.T) string {
	t.Helper()
	path, err := filepath.Abs(filepath.Join("..", "..", "bin", "k6"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("bin/k6 is missing: run `hack/tools.sh k6` to build it from its Go module (%v)", err)
	}
	return path
}

// target is a small HTTP service with a little latency, counting what it serves.
type target struct {
	*httptest.Server
	items, orders, spread, bad atomic.Int64
}

func newTarget(t *testing.T) *target {
	tg := &target{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/items", func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(2 * time.Millisecond)
		if r.URL.Query().Get("page") != "1" {
			tg.bad.Add(1)
			http.Error(w, "no page", http.StatusBadRequest)
			return
		}
		tg.items.Add(1)
		fmt.Fprint(w, `[{"id":1},{"id":2}]`)
	})
	mux.HandleFunc("POST /api/orders", func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(5 * time.Millisecond)
		body, _ := io.ReadAll(r.Body)
		if string(body) != `{"item":42}` || r.Header.Get("X-Request-Source") != "perf-operator" {
			tg.bad.Add(1)
			http.Error(w, "bad order", http.StatusBadRequest)
			return
		}
		tg.orders.Add(1)
		w.WriteHeader(http.StatusCreated)
	})
	// /api/spread takes 80 distinct latencies from 1 to 50 ms, 5 % apart: a wide
	// histogram.
	mux.HandleFunc("GET /api/spread", func(w http.ResponseWriter, r *http.Request) {
		n := tg.spread.Add(1)
		time.Sleep(time.Duration(float64(time.Millisecond) * math.Pow(1.05, float64(n%80))))
	})
	tg.Server = httptest.NewServer(mux)
	t.Cleanup(tg.Close)
	return tg
}

// runK6 lays out /scripts/run.js (and the user's script) under a temporary
// directory as the pod would see them, then runs one k6 "pod" per index
// concurrently, and returns their parsed results.
func runK6(t *testing.T, exp *perfv1.PerfExperiment, w Window, userScript string, extraEnv ...string) []*PodResult {
	t.Helper()
	bin := k6Binary(t)
	dir := t.TempDir()
	cm, err := ScriptConfigMap(exp)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "scripts", ScriptKey), cm.Data[ScriptKey])
	if ref := exp.Spec.Load.ScriptRef; ref != nil {
		writeFile(t, filepath.Join(dir, userScriptDir, ref.Key), userScript)
	}
	job, err := BuildJob(exp, w, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := job.Spec.Template.Spec.Containers[0]
	args := append([]string{}, c.Command[1:len(c.Command)-1]...)
	args = append(args, filepath.Join(dir, "scripts", ScriptKey))
	// In a pod the REST API listens on the pod's IP; here the "pods" share one
	// host (and other tests run k6 too), so each takes a free loopback port.
	args = withAPIAddress(t, args, "127.0.0.1:0")

	pods := int(*job.Spec.Completions)
	results := make([]*PodResult, pods)
	var wg sync.WaitGroup
	for i := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = runPod(t, bin, args, dir, i, c.Env, extraEnv)
		}()
	}
	wg.Wait()
	return results
}

func runPod(t *testing.T, bin string, args []string, dir string, index int, env []corev1.EnvVar, extraEnv []string) *PodResult {
	summaryPath := filepath.Join(dir, fmt.Sprintf("termination-log-%d", index))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir,
		EnvSummaryPath + "=" + summaryPath, fmt.Sprintf("%s=%d", EnvCompletionIndex, index)}
	for _, e := range env {
		cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
	}
	cmd.Env = append(cmd.Env, extraEnv...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Errorf("k6 pod %d: %v (k6 must exit 0 whatever the target does)\n%s", index, err, out.String())
		return nil
	}
	t.Logf("k6 pod %d:\n%s", index, out.String())
	msg, err := os.ReadFile(summaryPath)
	if err != nil {
		t.Errorf("k6 pod %d wrote no summary: %v", index, err)
		return nil
	}
	limit := 4096
	for _, e := range extraEnv {
		if v, ok := strings.CutPrefix(e, EnvSummaryLimit+"="); ok {
			limit, _ = strconv.Atoi(v)
		}
	}
	if len(msg) > limit {
		t.Errorf("k6 pod %d summary is %d bytes, over its limit of %d", index, len(msg), limit)
	}
	t.Logf("k6 pod %d summary: %d bytes", index, len(msg))
	r, err := ParseResult(string(msg))
	if err != nil {
		t.Errorf("k6 pod %d: %v", index, err)
	}
	return r
}

// withAPIAddress replaces the Job's --address (k6's REST API) with addr.
func withAPIAddress(t *testing.T, args []string, addr string) []string {
	t.Helper()
	out := append([]string{}, args...)
	for i, a := range out {
		if strings.HasPrefix(a, "--address=") {
			out[i] = "--address=" + addr
			return out
		}
	}
	t.Fatalf("the Job's k6 command sets no --address: %q", args)
	return nil
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// realExperiment is testExperiment aimed at the local target.
func realExperiment(tg *target) *perfv1.PerfExperiment {
	exp := testExperiment()
	exp.Spec.Target.URL = tg.URL
	return exp
}

// checkWindow asserts what every real window must show: a valid result at the
// target rate with no failures and no drops, and plausible latencies.
func checkWindow(t *testing.T, tg *target, results []*PodResult, w Window) perfv1.LoadResult {
	t.Helper()
	load, invalid := Combine(results, w)
	t.Logf("%d pod(s): achieved %.2f req/s of %d (%+.2f%%), %d requests, p50 %.3f ms, p95 %.3f ms, p99 %.3f ms",
		len(results), load.AchievedQPS, w.QPS, (load.AchievedQPS/float64(w.QPS)-1)*100, load.Requests, load.P50Ms, load.P95Ms, load.P99Ms)
	if len(invalid) > 0 {
		t.Errorf("window flagged: %q", invalid)
	}
	if math.Abs(load.AchievedQPS-float64(w.QPS)) > 0.01*float64(w.QPS) {
		t.Errorf("achieved %.2f req/s, more than 1%% off %d", load.AchievedQPS, w.QPS)
	}
	if load.Failures != 0 || load.DroppedIterations != 0 || tg.bad.Load() != 0 {
		t.Errorf("failures %d, dropped %d, bad requests at the target %d", load.Failures, load.DroppedIterations, tg.bad.Load())
	}
	if !(2 <= load.P50Ms && load.P50Ms <= load.P95Ms && load.P95Ms <= load.P99Ms && load.P99Ms < 500) {
		t.Errorf("implausible latencies: p50 %g, p95 %g, p99 %g ms (the target sleeps 2–5 ms)", load.P50Ms, load.P95Ms, load.P99Ms)
	}
	return load
}

// checkMix asserts the generated requests follow their 3:1 weights.
func checkMix(t *testing.T, tg *target, requests int64) {
	t.Helper()
	items, orders := tg.items.Load(), tg.orders.Load()
	if items+orders != requests {
		t.Errorf("the target served %d requests, k6 counted %d", items+orders, requests)
	}
	if share := float64(items) / float64(items+orders); math.Abs(share-0.75) > 0.01 {
		t.Errorf("GET /api/items got %.3f of the requests (%d of %d), want 0.75 by weight", share, items, items+orders)
	}
}

func TestRealK6OnePod(t *testing.T) {
	tg := newTarget(t)
	w := Window{Stage: 0, Variant: perfv1.VariantBaseline, QPS: 300, Duration: 5 * time.Second}
	results := runK6(t, realExperiment(tg), w, "")
	if t.Failed() {
		return
	}
	load := checkWindow(t, tg, results, w)
	checkMix(t, tg, load.Requests)

	// The pod's histogram must agree with k6's own statistics: it counts every
	// request, its top bucket holds k6's max, and its median is k6's within 2 %.
	r := results[0]
	if got := r.Histogram.Total(); got != r.Requests {
		t.Errorf("histogram counts %d requests, k6 %d", got, r.Requests)
	}
	top := r.Histogram.Buckets[len(r.Histogram.Buckets)-1].Index
	if want := bucketIndex(r.MaxMs, histogramMinMs, histogramGrowth); top < want-1 || top > want {
		t.Errorf("top bucket %d, k6's max %g ms is in bucket %d", top, r.MaxMs, want)
	}
	if p50 := r.Histogram.Quantile(0.5); math.Abs(p50/r.P50Ms-1) > 0.02 {
		t.Errorf("histogram p50 %g ms, k6's %g ms", p50, r.P50Ms)
	}
}

func TestRealK6TwoPods(t *testing.T) {
	tg := newTarget(t)
	exp := realExperiment(tg)
	exp.Spec.Load.K6.Parallelism = 2
	// 301 req/s: pod 0 runs 151 and pod 1 150, and they add up.
	w := Window{Stage: 1, Variant: perfv1.VariantTreatment, QPS: 301, Duration: 5 * time.Second}
	results := runK6(t, exp, w, "")
	if t.Failed() {
		return
	}
	if results[0].Rate != 151 || results[1].Rate != 150 || results[1].Index != 1 || results[1].Pods != 2 {
		t.Errorf("pods ran at %d and %d req/s (index %d of %d)", results[0].Rate, results[1].Rate, results[1].Index, results[1].Pods)
	}
	load := checkWindow(t, tg, results, w)
	checkMix(t, tg, load.Requests)
	for _, p := range []struct {
		name         string
		merged, a, b float64
	}{{"p50", load.P50Ms, results[0].P50Ms, results[1].P50Ms}, {"p95", load.P95Ms, results[0].P95Ms, results[1].P95Ms}} {
		if p.merged < 0.98*min(p.a, p.b) || p.merged > 1.02*max(p.a, p.b) {
			t.Errorf("merged %s %g ms is not between the pods' %g and %g ms", p.name, p.merged, p.a, p.b)
		}
	}
}

// TestRealK6UserScript runs a user's script through the operator's scenario: its
// setup data reaches its default function, and its requests are counted in the
// histogram.
func TestRealK6UserScript(t *testing.T) {
	tg := newTarget(t)
	exp := withScriptRef(realExperiment(tg))
	user := `import http from 'k6/http';
export const options = { vus: 1, iterations: 1 }; // ignored: the operator sets the rate
export function setup() { return { base: __ENV.TEST_TARGET }; }
export default function (data) { http.get(data.base + '/api/items?page=1'); }
`
	w := Window{Stage: 0, Variant: perfv1.VariantSettle, QPS: 50, Duration: 2 * time.Second}
	results := runK6(t, exp, w, user, "TEST_TARGET="+tg.URL)
	if t.Failed() {
		return
	}
	load := checkWindow(t, tg, results, w)
	if tg.items.Load() != load.Requests || results[0].Histogram.Total() != load.Requests {
		t.Errorf("target served %d, k6 counted %d, histogram %d", tg.items.Load(), load.Requests, results[0].Histogram.Total())
	}
}

// TestRealK6SummaryFits lowers the summary limit so the pods must coarsen their
// wide histograms to fit, as they would at 4096 bytes with a wider spread and
// more requests, and checks the coarse histograms still count every request and
// merge. A limit no histogram fits makes the pods leave it out, which Combine flags.
func TestRealK6SummaryFits(t *testing.T) {
	tg := newTarget(t)
	exp := realExperiment(tg)
	exp.Spec.Load.Requests = []perfv1.RequestSpec{{Method: "GET", Path: "/api/spread", Weight: 1}}
	exp.Spec.Load.K6.Parallelism = 2
	w := Window{Stage: 2, Variant: perfv1.VariantBaseline, QPS: 100, Duration: 2 * time.Second}
	results := runK6(t, exp, w, "", EnvSummaryLimit+"=400")
	if t.Failed() {
		return
	}
	for _, r := range results {
		if r.Histogram.IsZero() {
			t.Fatalf("pod %d left its histogram out", r.Index)
		}
		if r.Histogram.Width < 2 || r.Histogram.Total() != r.Requests {
			t.Errorf("pod %d: histogram of width %d counts %d of %d requests", r.Index, r.Histogram.Width, r.Histogram.Total(), r.Requests)
		}
	}
	load, invalid := Combine(results, w)
	t.Logf("coarse histograms of widths %d and %d: p50 %g ms, p99 %g ms", results[0].Histogram.Width, results[1].Histogram.Width, load.P50Ms, load.P99Ms)
	// The coarse p99 agrees with the pods' own exact p99s (k6's summary) within
	// the coarsening's resolution, whatever latency this machine adds.
	lo, hi := results[0].P99Ms, results[0].P99Ms
	for _, r := range results[1:] {
		lo, hi = min(lo, r.P99Ms), max(hi, r.P99Ms)
	}
	if len(invalid) > 0 || load.P50Ms < 1 || load.P99Ms < load.P50Ms || load.P99Ms < lo/2 || load.P99Ms > 2*hi {
		t.Errorf("coarse histograms: %+v, %q; the pods' exact p99s are %g..%g ms", load, invalid, lo, hi)
	}

	results = runK6(t, exp, w, "", EnvSummaryLimit+"=280")
	if t.Failed() {
		return
	}
	for _, r := range results {
		if !r.Histogram.IsZero() {
			t.Errorf("pod %d kept a histogram of width %d in 280 bytes", r.Index, r.Histogram.Width)
		}
	}
	if _, invalid := Combine(results, w); len(invalid) != 1 || !strings.Contains(invalid[0], "pod 0 reported no latency histogram") {
		t.Errorf("a window without histograms: %q", invalid)
	}
}

// TestRealK6TargetDown: a target that refuses connections fails every request,
// yet k6 exits 0 and reports it; judging the window is the operator's job.
func TestRealK6TargetDown(t *testing.T) {
	tg := newTarget(t)
	exp := realExperiment(tg)
	tg.Close() // its port now refuses connections
	w := Window{Stage: 0, Variant: perfv1.VariantBaseline, QPS: 20, Duration: 2 * time.Second}
	results := runK6(t, exp, w, "")
	if t.Failed() {
		return
	}
	load, invalid := Combine(results, w)
	if load.Requests < 40 || load.Failures != load.Requests || len(invalid) > 0 {
		t.Errorf("a refusing target: %+v, %q", load, invalid)
	}
}

// TestRealK6ClosedLoop runs a concurrency window: 3 virtual users on two pods
// (2 + 1) against a server that serves one request at a time in 10 ms. A closed
// loop never has more requests in flight than users, keeps the server busy
// (about 100 req/s) and waits in its queue (Little's law: 3 users at 100 req/s
// see about 30 ms).
func TestRealK6ClosedLoop(t *testing.T) {
	var (
		mu                sync.Mutex
		inFlight, maxSeen atomic.Int64
		served            atomic.Int64
	)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /one", func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			m := maxSeen.Load()
			if n <= m || maxSeen.CompareAndSwap(m, n) {
				break
			}
		}
		mu.Lock()
		time.Sleep(10 * time.Millisecond)
		mu.Unlock()
		served.Add(1)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	exp := testExperiment()
	exp.Spec.Target.URL = srv.URL
	exp.Spec.Load.Requests = []perfv1.RequestSpec{{Method: "GET", Path: "/one", Weight: 1}}
	exp.Spec.Load.K6.Parallelism = 2
	w := Window{Stage: 0, Variant: perfv1.VariantBaseline, VUs: 3, Duration: 5 * time.Second}
	results := runK6(t, exp, w, "")
	if t.Failed() {
		return
	}
	load, invalid := Combine(results, w)
	t.Logf("achieved %.1f req/s, %d requests, p50 %.1f ms, p99 %.1f ms, at most %d in flight", load.AchievedQPS, load.Requests, load.P50Ms, load.P99Ms, maxSeen.Load())
	if len(invalid) > 0 {
		t.Errorf("window flagged: %q", invalid)
	}
	for i, r := range results {
		if r.VUs != 3 || r.QPS != 0 || r.Rate != 0 || r.Pods != 2 || r.Index != int32(i) {
			t.Errorf("pod %d reported vus %d, qps %d, rate %d, index %d of %d", i, r.VUs, r.QPS, r.Rate, r.Index, r.Pods)
		}
	}
	if got := maxSeen.Load(); got != 3 {
		t.Errorf("at most %d requests were in flight, want exactly the 3 users", got)
	}
	if served.Load() != load.Requests || load.Failures != 0 || load.DroppedIterations != 0 {
		t.Errorf("server served %d, k6 counted %d (failures %d, dropped %d)", served.Load(), load.Requests, load.Failures, load.DroppedIterations)
	}
	// The closed loop shows in the bounds a busy machine cannot move: never
	// more than the server's 100 req/s, and a p50 of at least two queued
	// requests. On an idle machine the rate is about 94 and the p50 about 31
	// ms; a shared, loaded one slows k6 and lowers the one and raises the
	// other, so their far sides are only sanity bounds.
	if load.AchievedQPS < 20 || load.AchievedQPS > 101 {
		t.Errorf("achieved %.1f req/s, want at most the server's 100 (one 10 ms request at a time)", load.AchievedQPS)
	}
	if load.P50Ms < 20 || load.P50Ms > 150 {
		t.Errorf("p50 %.1f ms, want about 30 (3 users queued behind one 10 ms server)", load.P50Ms)
	}
}
