package k6

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
)

// PodResult is what one k6 pod reported for its window.
type PodResult struct {
	// Requests, Failures and DroppedIterations are k6's http_reqs,
	// http_req_failed (its failed share, as a count) and dropped_iterations.
	Requests, Failures, DroppedIterations int64
	// P50Ms … MaxMs are k6's own exact latency statistics of this pod's requests
	// (http_req_duration).
	P50Ms, P95Ms, P99Ms, MaxMs float64
	// DurationSeconds is how long k6 ran, including its graceful stop.
	DurationSeconds float64
	// Histogram holds this pod's latencies; Combine merges the pods' histograms.
	// It is zero (IsZero) when the pod's summary had to leave it out.
	Histogram Histogram

	// Iterations is k6's iterations: the arrivals the pod served. With the
	// generated script each is one request.
	Iterations int64
	// Index and Pods are the pod's JOB_COMPLETION_INDEX and the window's pod
	// count; QPS is the whole window's rate as the pod saw it and Rate its share;
	// VUs the whole window's closed-loop virtual users (0 for an arrival rate).
	Index, Pods, QPS, Rate, VUs int32
	// Window is the Job name the pod ran for.
	Window string
	// Start is when the pod's k6 run started (after its VUs were initialized): the
	// moment its load began.
	Start time.Time
}

// summaryVersion is the format version run.js writes; ParseResult reads no other.
const summaryVersion = 1

// summary is run.js's termination message.
type summary struct {
	V          int          `json:"v"`
	Window     string       `json:"window"`
	Index      int32        `json:"index"`
	Pods       int32        `json:"pods"`
	QPS        int32        `json:"qps"`
	Rate       int32        `json:"rate"`
	VUs        int32        `json:"vus"`
	StartMs    int64        `json:"startMs"`
	DurationMs float64      `json:"durationMs"`
	Requests   int64        `json:"requests"`
	Iterations int64        `json:"iterations"`
	Failures   int64        `json:"failures"`
	Dropped    int64        `json:"dropped"`
	P50        float64      `json:"p50"`
	P95        float64      `json:"p95"`
	P99        float64      `json:"p99"`
	Max        float64      `json:"max"`
	Hist       *summaryHist `json:"hist"`
}

type summaryHist struct {
	MinMs  float64 `json:"minMs"`
	Growth float64 `json:"growth"`
	Width  int     `json:"width"`
	B      []int64 `json:"b"`
}

// ParseResult reads the summary a k6 pod left in its container's termination
// message (status.containerStatuses[name=k6].state.terminated.message).
func ParseResult(terminationMessage string) (*PodResult, error) {
	text := strings.TrimSpace(terminationMessage)
	if text == "" {
		return nil, errors.New("the k6 termination message is empty: k6 ended before writing its summary (see the pod's log)")
	}
	var s summary
	if err := json.Unmarshal([]byte(text), &s); err != nil {
		if strings.HasPrefix(text, "{") && !strings.HasSuffix(text, "}") {
			return nil, fmt.Errorf("the k6 summary is truncated after %d bytes: %w", len(text), err)
		}
		return nil, fmt.Errorf("the k6 termination message is not a summary (%w): it starts %q", err, head(text, 60))
	}
	if s.V != summaryVersion {
		return nil, fmt.Errorf("the k6 summary has format version %d, not %d: the ConfigMap's run.js is from another operator version", s.V, summaryVersion)
	}
	if err := s.validate(); err != nil {
		return nil, fmt.Errorf("the k6 summary is inconsistent: %w", err)
	}
	r := &PodResult{
		Requests: s.Requests, Failures: s.Failures, DroppedIterations: s.Dropped, Iterations: s.Iterations,
		P50Ms: s.P50, P95Ms: s.P95, P99Ms: s.P99, MaxMs: s.Max,
		DurationSeconds: s.DurationMs / 1000,
		Index:           s.Index, Pods: s.Pods, QPS: s.QPS, Rate: s.Rate, VUs: s.VUs, Window: s.Window,
		Start: time.UnixMilli(s.StartMs).UTC(),
	}
	if s.Hist != nil {
		h, err := decodeHistogram(s.Hist.MinMs, s.Hist.Growth, s.Hist.Width, s.Hist.B)
		if err != nil {
			return nil, fmt.Errorf("the k6 summary's histogram: %w", err)
		}
		r.Histogram = h
	}
	return r, nil
}

func (s *summary) validate() error {
	switch {
	case s.Pods < 1 || s.Index < 0 || s.Index >= s.Pods:
		return fmt.Errorf("pod index %d of %d pods", s.Index, s.Pods)
	case s.Requests < 0 || s.Iterations < 0 || s.Failures < 0 || s.Dropped < 0:
		return fmt.Errorf("negative counts (requests %d, iterations %d, failures %d, dropped %d)", s.Requests, s.Iterations, s.Failures, s.Dropped)
	case s.Failures > s.Requests:
		return fmt.Errorf("%d failures of %d requests", s.Failures, s.Requests)
	case s.QPS < 0 || s.VUs < 0:
		return fmt.Errorf("negative load (qps %d, vus %d)", s.QPS, s.VUs)
	case s.DurationMs < 0 || s.P50 < 0 || s.P95 < 0 || s.P99 < 0 || s.Max < 0:
		return errors.New("negative duration or latency")
	}
	return nil
}

func head(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// Combine adds up the pods' results of window w. Counts are summed; the achieved
// rate is over the window's planned duration. Latencies are k6's exact ones with a
// single pod and percentiles of the merged histograms with several, never averages.
// The reasons returned say why the window must not be trusted: a rate more than
// 1 % off the target, dropped iterations, missing pods or unmergeable latencies.
func Combine(results []*PodResult, w Window) (perfv1.LoadResult, []string) {
	pods, invalid := selectPods(results, w)
	var out perfv1.LoadResult
	var arrivals int64
	for _, r := range pods {
		out.Requests += r.Requests
		out.Failures += r.Failures
		out.DroppedIterations += r.DroppedIterations
		arrivals += arrivalsOf(r)
	}
	if secs := w.Duration.Seconds(); secs > 0 {
		out.AchievedQPS = round3(float64(out.Requests) / secs)
	}
	if msg := rateCheck(arrivals, int64(len(pods)), w); msg != "" {
		invalid = append(invalid, msg)
	}
	if out.DroppedIterations > 0 {
		invalid = append(invalid, fmt.Sprintf("dropped %d iterations: the load generator, not the target, fell short", out.DroppedIterations))
	}
	var msg string
	out.P50Ms, out.P95Ms, out.P99Ms, msg = latencies(pods)
	if msg != "" {
		invalid = append(invalid, msg)
	}
	return out, invalid
}

// arrivalsOf is the iterations the pod served, or its requests when it reported
// no iterations (a result built by hand): the number the arrival rate sets.
func arrivalsOf(r *PodResult) int64 {
	if r.Iterations > 0 {
		return r.Iterations
	}
	return r.Requests
}

// selectPods drops nil results and duplicates, and says which pods are missing
// or belong to another window. The expected pod count is the one the pods report
// (hand-built results that report none count as all there is).
func selectPods(results []*PodResult, w Window) ([]*PodResult, []string) {
	var pods []*PodResult
	var invalid []string
	seen := map[int32]bool{}
	expected := int32(0)
	for _, r := range results {
		if r == nil {
			continue
		}
		if r.Pods > 0 {
			if seen[r.Index] {
				invalid = append(invalid, fmt.Sprintf("two results for k6 pod %d; the second is ignored", r.Index))
				continue
			}
			seen[r.Index] = true
			expected = max(expected, r.Pods)
		}
		switch {
		case r.QPS > 0 && r.QPS != w.QPS:
			invalid = append(invalid, fmt.Sprintf("k6 pod %d ran a %d req/s window, not %d: its results belong to another window", r.Index, r.QPS, w.QPS))
		case r.VUs > 0 && r.VUs != w.VUs:
			invalid = append(invalid, fmt.Sprintf("k6 pod %d ran a window of %d virtual users, not %d: its results belong to another window", r.Index, r.VUs, w.VUs))
		}
		pods = append(pods, r)
	}
	switch {
	case len(pods) == 0:
		invalid = append(invalid, "no k6 pod reported results for the window")
	case int32(len(pods)) < expected:
		var missing []string
		for i := int32(0); i < expected; i++ {
			if !seen[i] {
				missing = append(missing, fmt.Sprint(i))
			}
		}
		invalid = append(invalid, fmt.Sprintf("results from %d of %d k6 pods (missing pod %s)", len(pods), expected, strings.Join(missing, ", ")))
	}
	sort.SliceStable(pods, func(a, b int) bool { return pods[a].Index < pods[b].Index })
	return pods, invalid
}

// rateCheck flags a window whose pods served more than 1 % fewer or more arrivals
// than QPS × duration. Each pod may start one extra iteration at the very end (k6
// rounds its arrival period down), so an excess of up to one per pod is allowed.
func rateCheck(arrivals, pods int64, w Window) string {
	secs := w.Duration.Seconds()
	if secs <= 0 || w.QPS <= 0 {
		return ""
	}
	expected := float64(w.QPS) * secs
	diff := float64(arrivals) - expected
	if math.Abs(diff)*100 <= expected || (diff > 0 && diff <= float64(pods)) {
		return ""
	}
	direction := "below"
	if diff > 0 {
		direction = "above"
	}
	return fmt.Sprintf("achieved %.1f req/s, %.1f%% %s the target %d",
		float64(arrivals)/secs, math.Abs(diff)/expected*100, direction, w.QPS)
}

// latencies returns p50, p95 and p99: k6's own with one pod, else percentiles of
// the merged histograms, held to the largest latency any pod saw. A reason is
// returned when the histograms cannot stand for all requests.
func latencies(pods []*PodResult) (p50, p95, p99 float64, invalid string) {
	switch len(pods) {
	case 0:
		return 0, 0, 0, ""
	case 1:
		return pods[0].P50Ms, pods[0].P95Ms, pods[0].P99Ms, ""
	}
	var hs []Histogram
	var requests, counted int64
	maxMs := 0.0
	for _, r := range pods {
		if r.Histogram.IsZero() {
			return 0, 0, 0, fmt.Sprintf("k6 pod %d reported no latency histogram, so the pods' percentiles cannot be merged", r.Index)
		}
		hs = append(hs, r.Histogram)
		requests += r.Requests
		counted += r.Histogram.Total()
		maxMs = max(maxMs, r.MaxMs)
	}
	merged, err := MergeHistograms(hs...)
	if err != nil {
		return 0, 0, 0, "the pods' latencies cannot be merged: " + err.Error()
	}
	q := func(p float64) float64 {
		v := merged.Quantile(p)
		if maxMs > 0 {
			v = min(v, maxMs)
		}
		return round3(v)
	}
	if counted != requests {
		invalid = fmt.Sprintf("the latency histograms count %d of %d requests (redirects, and requests made through named imports of k6/http, are not counted), so the merged percentiles leave some out", counted, requests)
	}
	return q(0.50), q(0.95), q(0.99), invalid
}

func round3(x float64) float64 {
	return math.Round(x*1000) / 1000
}
