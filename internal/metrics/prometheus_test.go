package metrics

import (
	"context"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// fakeAPI answers Query with a function of the query and counts the calls;
// every other method panics (nil embedded interface).
type fakeAPI struct {
	promv1.API
	calls atomic.Int32
	query func(q string, ts time.Time) (model.Value, error)
}

func (f *fakeAPI) Query(_ context.Context, q string, ts time.Time, _ ...promv1.Option) (model.Value, promv1.Warnings, error) {
	f.calls.Add(1)
	v, err := f.query(q, ts)
	return v, nil, err
}

func vec(pairs ...any) model.Vector {
	var out model.Vector
	for i := 0; i < len(pairs); i += 2 {
		out = append(out, &model.Sample{Metric: model.Metric{"pod": model.LabelValue(pairs[i].(string))}, Value: model.SampleValue(pairs[i+1].(float64))})
	}
	return out
}

func TestPrometheusSampleMergesByPod(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	api := &fakeAPI{query: func(q string, ts time.Time) (model.Value, error) {
		if !ts.Equal(at) {
			t.Errorf("query at %s, want %s", ts, at)
		}
		switch {
		case strings.HasPrefix(q, "cpu"):
			return vec("a", 0.5, "b", 1.0, "stranger", 9.0), nil
		case strings.HasPrefix(q, "mem"):
			return vec("a", 100.0), nil
		case strings.HasPrefix(q, "gc"):
			return vec("b", 0.01), nil
		default:
			return vec("c", 42.0), nil
		}
	}}
	q := Queries{CPU: `cpu{pod=~"{{pod}}"}[{{range}}]`, Memory: `mem`, Heap: `heap`, GC: `gc`}
	p := NewPrometheus(api, q, WithClock(func() time.Time { return at }), WithInterval(2*time.Minute))
	if p.Name() != "prometheus" {
		t.Errorf("Name = %q", p.Name())
	}
	got, err := p.Sample(context.Background(), Target{Namespace: "n", Container: "c", Pods: []string{"c", "b", "a", "d"}})
	if err != nil {
		t.Fatal(err)
	}
	if n := api.calls.Load(); n != 4 {
		t.Errorf("%d queries, want 4", n)
	}
	nan := math.NaN()
	want := []Sample{
		{Time: at, Window: 2 * time.Minute, Pod: "a", CPUCores: 0.5, WorkingSetBytes: 100, HeapBytes: nan, GCSecondsPerSecond: nan},
		{Time: at, Window: 2 * time.Minute, Pod: "b", CPUCores: 1, WorkingSetBytes: nan, HeapBytes: nan, GCSecondsPerSecond: 0.01},
		{Time: at, Window: 2 * time.Minute, Pod: "c", CPUCores: nan, WorkingSetBytes: nan, HeapBytes: 42, GCSecondsPerSecond: nan},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if !sameSample(got[i], want[i]) {
			t.Errorf("sample %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}

func sameSample(a, b Sample) bool {
	eq := func(x, y float64) bool { return x == y || (math.IsNaN(x) && math.IsNaN(y)) }
	return a.Time.Equal(b.Time) && a.Window == b.Window && a.Pod == b.Pod && eq(a.CPUCores, b.CPUCores) && eq(a.WorkingSetBytes, b.WorkingSetBytes) && eq(a.HeapBytes, b.HeapBytes) && eq(a.GCSecondsPerSecond, b.GCSecondsPerSecond)
}

func TestPrometheusSampleErrors(t *testing.T) {
	tgt := Target{Namespace: "n", Container: "c", Pods: []string{"a"}}
	q := Queries{CPU: "cpu", Memory: "mem", Heap: "heap"}
	tests := []struct {
		name  string
		tgt   Target
		q     Queries
		val   model.Value
		err   error
		want  string
		calls int32
	}{
		{"no pods", Target{Namespace: "n", Container: "c"}, q, nil, nil, "no pod names", 0},
		{"no container", Target{Namespace: "n", Pods: []string{"a"}}, q, nil, nil, "target container is empty", 0},
		{"bad template", tgt, Queries{CPU: "cpu{pod={{pod}}}", Memory: "m", Heap: "h"}, nil, nil, "prometheus: cpu query template: placeholder {{pod}}", 0},
		{"matrix", tgt, q, model.Matrix{}, nil, "prometheus: cpu query returned a matrix, want an instant vector", 1},
		{"scalar", tgt, q, &model.Scalar{}, nil, "returned a scalar", 1},
		{"no pod label", tgt, q, model.Vector{{Metric: model.Metric{"x": "y"}, Value: 1}}, nil, `without a pod label; aggregate with sum by (pod) or rename`, 1},
		{"duplicate pod", tgt, q, vec("a", 1.0, "a", 2.0), nil, `several series for pod "a"`, 1},
		{"api error, no retry", tgt, q, nil, &promv1.Error{Type: promv1.ErrTimeout, Msg: "query timed out in expression evaluation"}, "prometheus: cpu query failed: timeout: query timed out in expression evaluation; query: cpu", 1},
		{"context deadline", tgt, q, nil, context.DeadlineExceeded, "cpu query failed: timed out; query: cpu", 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			api := &fakeAPI{query: func(string, time.Time) (model.Value, error) { return tc.val, tc.err }}
			_, err := NewPrometheus(api, tc.q).Sample(context.Background(), tc.tgt)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
			if tc.err != nil && !errors.Is(err, tc.err) {
				t.Errorf("err does not wrap %v", tc.err)
			}
			if n := api.calls.Load(); n != tc.calls {
				t.Errorf("%d queries, want %d", n, tc.calls)
			}
		})
	}
}

// TestNewPrometheusAPIErrorsNameTheStatus runs the HTTP client against servers
// that fail in the usual ways.
func TestNewPrometheusAPIErrorsNameTheStatus(t *testing.T) {
	tests := []struct {
		name    string
		status  int
		body    string
		want    string
		errType string
	}{
		{"proxy 503 with html", 503, "<html>upstream unavailable</html>", "HTTP 503 Service Unavailable from /api/v1/query: not a Prometheus error (body not shown)", ""},
		{"prometheus 422", 422, `{"status":"error","errorType":"execution","error":"many-to-many matching not allowed"}`, "HTTP 422 Unprocessable Entity from /api/v1/query: execution: many-to-many matching not allowed", "execution"},
		{"auth proxy 401", 401, "Unauthorized", "HTTP 401 Unauthorized from /api/v1/query: not a Prometheus error (body not shown)", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var hits atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				hits.Add(1)
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			api, err := NewPrometheusAPI(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			_, err = NewPrometheus(api, DefaultQueries()).Sample(context.Background(), Target{Namespace: "n", Container: "c", Pods: []string{"a"}})
			if err == nil || !strings.Contains(err.Error(), "prometheus: cpu query failed: "+tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
			var he *HTTPError
			if !errors.As(err, &he) || he.StatusCode != tc.status || he.ErrorType != tc.errType {
				t.Errorf("HTTPError = %+v", he)
			}
			if n := hits.Load(); n != 1 {
				t.Errorf("%d requests, want 1 (no retries)", n)
			}
			if err := Reachable(context.Background(), api); err == nil || !strings.Contains(err.Error(), "prometheus: query vector(1) failed: HTTP "+tc.want[5:8]) {
				t.Errorf("Reachable: %v", err)
			}
		})
	}
}

func TestReachable(t *testing.T) {
	ok := &fakeAPI{query: func(q string, _ time.Time) (model.Value, error) {
		if q != "vector(1)" {
			t.Errorf("query %q", q)
		}
		return model.Vector{{Metric: model.Metric{}, Value: 1}}, nil
	}}
	if err := Reachable(context.Background(), ok); err != nil {
		t.Error(err)
	}
	odd := &fakeAPI{query: func(string, time.Time) (model.Value, error) { return model.Vector{}, nil }}
	if err := Reachable(context.Background(), odd); err == nil || !strings.Contains(err.Error(), "not a Prometheus query API") {
		t.Errorf("empty answer: %v", err)
	}
	// Nothing listens: the error is the dial error, after one attempt.
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	api, _ := NewPrometheusAPI(url)
	if err := Reachable(context.Background(), api); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("closed port: %v", err)
	}
}
