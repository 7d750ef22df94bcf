package metrics

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
)

// ErrNoPods is returned by the Prometheus provider for a target without pod
// names: cAdvisor's series carry no pod labels, so Prometheus can only select
// pods by name.
var ErrNoPods = errors.New("target has no pod names (Target.Pods) to query Prometheus for")

// PrometheusOption configures NewPrometheus.
type PrometheusOption func(*prometheusProvider)

// WithInterval sets the sampling interval, from which {{range}} is derived
// (perfv1.RateRange). Without it {{range}} is perfv1.MinRateRange. A
// Prometheus that scrapes less often than every 30s needs a CPU query with a
// longer literal range.
func WithInterval(d time.Duration) PrometheusOption {
	return func(p *prometheusProvider) { p.rng = perfv1.RateRange(d) }
}

// NewPrometheus returns a provider that runs one instant query per metric (CPU,
// memory, heap, GC time: four per Sample) at the clock's time. Every Sample of
// one call has that evaluation time as its Time: CPU and GC time are rates over
// the {{range}} before it, memory and heap the latest values at it. A pod missing from
// one query's result has that value NaN; a pod missing from all is left out;
// series for pods outside Target.Pods are ignored. Any failed query fails the
// Sample; the provider never retries.
func NewPrometheus(api promv1.API, q Queries, opts ...PrometheusOption) Provider {
	p := &prometheusProvider{api: api, q: q, now: time.Now, rng: perfv1.RateRange(0)}
	for _, o := range opts {
		o(p)
	}
	return p
}

type prometheusProvider struct {
	api promv1.API
	q   Queries
	now func() time.Time
	rng time.Duration
}

// PrometheusName is the Prometheus provider's Name.
const PrometheusName = "prometheus"

func (p *prometheusProvider) Name() string { return PrometheusName }

func (p *prometheusProvider) Sample(ctx context.Context, t Target) ([]Sample, error) {
	if err := checkTarget(t); err != nil {
		return nil, fmt.Errorf("prometheus: %w", err)
	}
	if len(t.Pods) == 0 {
		return nil, fmt.Errorf("prometheus: %w", ErrNoPods)
	}
	v := templateValues{namespace: t.Namespace, container: t.Container, pods: t.Pods, rng: p.rng}
	at := p.now()
	var results [4]map[string]float64
	for i, m := range p.q.each() {
		query, err := expand(m.tmpl, v)
		if err != nil {
			return nil, fmt.Errorf("prometheus: %s query template: %w", m.name, err)
		}
		results[i], err = queryByPod(ctx, p.api, m.name, query, at)
		if err != nil {
			return nil, err
		}
	}
	pods := slices.Clone(t.Pods)
	slices.Sort(pods)
	pods = slices.Compact(pods)
	var out []Sample
	for _, pod := range pods {
		s := Sample{Time: at, Window: p.rng, Pod: pod, CPUCores: Unknown, WorkingSetBytes: Unknown, HeapBytes: Unknown, GCSecondsPerSecond: Unknown}
		found := false
		for i, dst := range []*float64{&s.CPUCores, &s.WorkingSetBytes, &s.HeapBytes, &s.GCSecondsPerSecond} {
			if val, ok := results[i][pod]; ok {
				*dst, found = val, true
			}
		}
		if found {
			out = append(out, s)
		}
	}
	return out, nil
}

// checkTarget refuses a target whose samples would be meaningless.
func checkTarget(t Target) error {
	if t.Namespace == "" {
		return errors.New("target namespace is empty")
	}
	if t.Container == "" {
		return errors.New("target container is empty")
	}
	return nil
}

// queryByPod runs one instant query and returns its value per `pod` label.
func queryByPod(ctx context.Context, api promv1.API, name, query string, at time.Time) (map[string]float64, error) {
	val, _, err := api.Query(ctx, query, at)
	if err != nil {
		return nil, queryError(name, query, err)
	}
	vec, ok := val.(model.Vector)
	if !ok {
		return nil, fmt.Errorf("prometheus: %s query returned a %s, want an instant vector with one series per pod; query: %s", name, valueType(val), query)
	}
	out := make(map[string]float64, len(vec))
	for _, s := range vec {
		pod, ok := s.Metric["pod"]
		if !ok {
			return nil, fmt.Errorf("prometheus: %s query returned series %s without a pod label; aggregate with sum by (pod) or rename the label with label_replace; query: %s", name, s.Metric, query)
		}
		if _, dup := out[string(pod)]; dup {
			return nil, fmt.Errorf("prometheus: %s query returned several series for pod %q; aggregate with sum by (pod); query: %s", name, pod, query)
		}
		out[string(pod)] = float64(s.Value)
	}
	return out, nil
}

func valueType(v model.Value) string {
	if v == nil {
		return "nothing"
	}
	return v.Type().String()
}

// queryError names the source, the metric, the query and, where the server
// answered, its error type and HTTP status.
func queryError(name, query string, err error) error {
	return &describedError{msg: fmt.Sprintf("prometheus: %s query failed: %s; query: %s", name, describe(err), query), err: err}
}

// describedError has a message of its own and keeps its cause for errors.Is/As.
type describedError struct {
	msg string
	err error
}

func (e *describedError) Error() string { return e.msg }
func (e *describedError) Unwrap() error { return e.err }

func describe(err error) string {
	var he *HTTPError
	if errors.As(err, &he) {
		return he.Error()
	}
	var pe *promv1.Error
	if errors.As(err, &pe) {
		// pe.Detail is the raw body: not shown (see HTTPError.Body).
		return string(pe.Type) + ": " + pe.Msg
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "timed out"
	}
	return err.Error()
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// Reachable makes one cheap query (vector(1)) and reports whether the server
// answers with the expected result. It works with Prometheus-compatible servers
// (Thanos, Mimir, VictoriaMetrics) that lack the status endpoints.
func Reachable(ctx context.Context, api promv1.API) error {
	const q = "vector(1)"
	val, _, err := api.Query(ctx, q, time.Time{})
	if err != nil {
		return &describedError{msg: fmt.Sprintf("prometheus: query %s failed: %s", q, describe(err)), err: err}
	}
	if vec, ok := val.(model.Vector); !ok || len(vec) != 1 || vec[0].Value != 1 {
		return fmt.Errorf("prometheus: query %s returned %v, want a single 1: not a Prometheus query API", q, val)
	}
	return nil
}

// HTTPError is a non-2xx answer from the Prometheus HTTP API, as returned by
// the clients NewPrometheusAPI makes.
type HTTPError struct {
	// StatusCode and Status are the HTTP status, such as 503 and "503 Service Unavailable".
	StatusCode int
	Status     string
	// Path is the request's path, such as /api/v1/query.
	Path string
	// ErrorType and Message are Prometheus' error, when the body carries one.
	ErrorType, Message string
	// Body is the start of a body that is not a Prometheus error. It is never
	// part of Error(), which reaches the experiment's status: the operator
	// must not read back to an experiment's author what an address the author
	// named answered, beyond its status.
	Body string
}

func (e *HTTPError) Error() string {
	s := fmt.Sprintf("HTTP %s from %s", e.Status, e.Path)
	switch {
	case e.Message != "":
		s += ": " + e.ErrorType + ": " + e.Message
	case e.Body != "":
		s += ": not a Prometheus error (body not shown)"
	}
	return s
}

// NewPrometheusAPI returns a client of the Prometheus HTTP API at address whose
// errors name the HTTP status (see HTTPError). Each request times out after 30s;
// there are no retries. It fits Choose's promAPI argument.
func NewPrometheusAPI(address string) (promv1.API, error) {
	c, err := promapi.NewClient(promapi.Config{
		Address: address,
		Client:  &http.Client{Transport: promapi.DefaultRoundTripper, Timeout: 30 * time.Second},
	})
	if err != nil {
		return nil, fmt.Errorf("prometheus: client for %q: %w", address, err)
	}
	return promv1.NewAPI(statusClient{c}), nil
}

// statusClient turns non-2xx answers into HTTPErrors. It still returns the
// response, so client_golang's POST-to-GET fallback (on 405 and friends) works.
type statusClient struct{ promapi.Client }

func (c statusClient) Do(ctx context.Context, req *http.Request) (*http.Response, []byte, error) {
	resp, body, err := c.Client.Do(ctx, req)
	if err != nil || resp.StatusCode/100 == 2 {
		return resp, body, err
	}
	he := &HTTPError{StatusCode: resp.StatusCode, Status: resp.Status, Path: req.URL.Path}
	var perr struct {
		Status    string `json:"status"`
		ErrorType string `json:"errorType"`
		Error     string `json:"error"`
	}
	if json.Unmarshal(body, &perr) == nil && perr.Status == "error" {
		he.ErrorType, he.Message = perr.ErrorType, perr.Error
	} else {
		he.Body = truncate(strings.TrimSpace(string(body)), 200)
	}
	return resp, body, he
}
