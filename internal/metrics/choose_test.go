package metrics

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	metricsclientset "k8s.io/metrics/pkg/client/clientset/versioned"
	metricsfake "k8s.io/metrics/pkg/client/clientset/versioned/fake"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
)

func TestChoose(t *testing.T) {
	const url = "http://prometheus-operated.monitoring:9090"
	up := func() *fakeAPI {
		return &fakeAPI{query: func(string, time.Time) (model.Value, error) {
			return model.Vector{{Metric: model.Metric{}, Value: 1}}, nil
		}}
	}
	down := func() *fakeAPI {
		return &fakeAPI{query: func(string, time.Time) (model.Value, error) {
			return nil, &HTTPError{StatusCode: 503, Status: "503 Service Unavailable", Path: "/api/v1/query", Body: "no healthy upstream"}
		}}
	}
	prom := &perfv1.PrometheusSpec{URL: url}
	badQueries := &perfv1.MetricQueries{CPU: `rate(x{pod={{pod}}}[1m])`}
	ms := metricsfake.NewSimpleClientset()

	tests := []struct {
		name       string
		spec       perfv1.MetricsSpec
		api        *fakeAPI
		clientErr  error
		noMS       bool
		want       string // provider name, "" for an error
		reason     string
		err        string
		wantCalled bool
	}{
		{name: "metrics-server", spec: perfv1.MetricsSpec{Source: perfv1.MetricsSourceMetricsServer, Prometheus: prom}, api: up(),
			want: "metrics-server", reason: "metrics.source is metrics-server"},
		{name: "metrics-server without a client", spec: perfv1.MetricsSpec{Source: perfv1.MetricsSourceMetricsServer}, noMS: true,
			err: "no metrics.k8s.io client"},
		{name: "prometheus up", spec: perfv1.MetricsSpec{Source: perfv1.MetricsSourcePrometheus, Prometheus: prom, Interval: "30s"}, api: up(),
			want: "prometheus", reason: "metrics.source is prometheus: querying " + url, wantCalled: true},
		{name: "prometheus down is an error, not a fallback", spec: perfv1.MetricsSpec{Source: perfv1.MetricsSourcePrometheus, Prometheus: prom}, api: down(),
			err: "metrics.source is prometheus: " + url + " unreachable: prometheus: query vector(1) failed: HTTP 503 Service Unavailable from /api/v1/query: not a Prometheus error (body not shown)", wantCalled: true},
		{name: "prometheus without url", spec: perfv1.MetricsSpec{Source: perfv1.MetricsSourcePrometheus}, api: up(),
			err: "spec.metrics.prometheus.url is not set"},
		{name: "prometheus client error", spec: perfv1.MetricsSpec{Source: perfv1.MetricsSourcePrometheus, Prometheus: prom}, clientErr: errors.New("bad url"),
			err: "prometheus client for " + url + ": bad url"},
		{name: "prometheus bad queries", spec: perfv1.MetricsSpec{Source: perfv1.MetricsSourcePrometheus, Prometheus: prom, Queries: badQueries}, api: up(),
			err: "spec.metrics.queries: cpu query: placeholder {{pod}}"},
		{name: "auto with prometheus up", spec: perfv1.MetricsSpec{Source: perfv1.MetricsSourceAuto, Prometheus: prom}, api: up(),
			want: "prometheus", reason: "metrics.source is auto and Prometheus at " + url + " answers", wantCalled: true},
		{name: "empty source is auto", spec: perfv1.MetricsSpec{Prometheus: prom}, api: up(),
			want: "prometheus", reason: "metrics.source is auto", wantCalled: true},
		{name: "auto with prometheus down", spec: perfv1.MetricsSpec{Source: perfv1.MetricsSourceAuto, Prometheus: prom}, api: down(),
			want: "metrics-server", reason: "metrics.source is auto and Prometheus is not usable (" + url + " unreachable: prometheus: query vector(1) failed: HTTP 503", wantCalled: true},
		{name: "auto without prometheus", spec: perfv1.MetricsSpec{Source: perfv1.MetricsSourceAuto}, api: up(),
			want: "metrics-server", reason: "spec.metrics.prometheus is not set"},
		{name: "auto with bad queries is an error", spec: perfv1.MetricsSpec{Source: perfv1.MetricsSourceAuto, Prometheus: prom, Queries: badQueries}, api: up(),
			err: "spec.metrics.queries: cpu query"},
		{name: "unknown source", spec: perfv1.MetricsSpec{Source: "graphite"},
			err: `unknown metrics.source "graphite"`},
		{name: "bad interval", spec: perfv1.MetricsSpec{Source: perfv1.MetricsSourceAuto, Interval: "soon"},
			err: "spec.metrics.interval"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var gotURL string
			promAPI := func(u string) (promv1.API, error) {
				gotURL = u
				if tc.clientErr != nil {
					return nil, tc.clientErr
				}
				return tc.api, nil
			}
			var client metricsclientset.Interface = ms
			if tc.noMS {
				client = nil
			}
			p, reason, err := Choose(context.Background(), tc.spec, promAPI, client)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.err)
				}
				if p != nil {
					t.Errorf("a provider came with the error")
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				if p.Name() != tc.want {
					t.Errorf("provider %s, want %s", p.Name(), tc.want)
				}
				if !strings.Contains(reason, tc.reason) {
					t.Errorf("reason %q, want it to contain %q", reason, tc.reason)
				}
			}
			called := tc.api != nil && tc.api.calls.Load() > 0
			if called != tc.wantCalled {
				t.Errorf("Prometheus queried: %v, want %v", called, tc.wantCalled)
			}
			if tc.api != nil && tc.api.calls.Load() > 1 {
				t.Errorf("%d queries, want at most 1", tc.api.calls.Load())
			}
			if gotURL != "" && gotURL != url {
				t.Errorf("client for %q", gotURL)
			}
		})
	}
}

func TestChoosePassesIntervalAndQueries(t *testing.T) {
	api := &fakeAPI{query: func(string, time.Time) (model.Value, error) {
		return model.Vector{{Metric: model.Metric{"pod": "a"}, Value: 1}}, nil
	}}
	spec := perfv1.MetricsSpec{
		Source: perfv1.MetricsSourcePrometheus, Interval: "2m",
		Prometheus: &perfv1.PrometheusSpec{URL: "http://p:9090"},
		Queries:    &perfv1.MetricQueries{Heap: `h{pod=~"{{pod}}"}[{{range}}]`},
	}
	p, _, err := Choose(context.Background(), spec, func(string) (promv1.API, error) { return api, nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	var queries []string
	api.query = func(q string, _ time.Time) (model.Value, error) {
		queries = append(queries, q)
		return model.Vector{{Metric: model.Metric{"pod": "a"}, Value: 1}}, nil
	}
	if _, err := p.Sample(context.Background(), Target{Namespace: "n", Container: "c", Pods: []string{"a"}}); err != nil {
		t.Fatal(err)
	}
	if len(queries) != 4 || !strings.Contains(queries[0], "[2m]") || queries[2] != `h{pod=~"^(?:a)$"}[2m]` || !strings.Contains(queries[3], "jvm_gc_collection_seconds_sum") {
		t.Errorf("queries %q: want the 2m range and the user's heap query", queries)
	}
}
