package metrics

import (
	"context"
	"fmt"
	"time"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	metricsclientset "k8s.io/metrics/pkg/client/clientset/versioned"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
)

// ReachableTimeout bounds Choose's reachability check of Prometheus.
const ReachableTimeout = 5 * time.Second

// Choose picks the provider spec.metrics asks for and says which and why in
// reason, a sentence for status:
//
//   - prometheus: the Prometheus provider at spec.metrics.prometheus.url. When it
//     is unreachable Choose returns the error and no provider: the user asked for
//     Prometheus (and its heap metric), so falling back silently would measure
//     something else. The caller may call Choose again later.
//   - metrics-server: the metrics.k8s.io provider.
//   - auto (or empty): Prometheus when spec.metrics.prometheus is set and answers
//     vector(1) within ReachableTimeout, metrics-server otherwise; reason then
//     carries Prometheus' error.
//
// Invalid query templates are an error whenever Prometheus would be used;
// promAPI makes a client for a URL (NewPrometheusAPI fits). Choose makes at
// most one query and never retries.
func Choose(ctx context.Context, spec perfv1.MetricsSpec, promAPI func(url string) (promv1.API, error), ms metricsclientset.Interface) (Provider, string, error) {
	interval, err := spec.Interval.Parse()
	if err != nil {
		return nil, "", fmt.Errorf("spec.metrics.interval: %w", err)
	}
	useMetricsServer := func(reason string) (Provider, string, error) {
		if ms == nil {
			return nil, reason, fmt.Errorf("%s, but no metrics.k8s.io client was given", reason)
		}
		return NewMetricsServer(ms), reason, nil
	}

	switch spec.Source {
	case perfv1.MetricsSourceMetricsServer:
		return useMetricsServer("metrics.source is metrics-server: reading metrics.k8s.io (no heap metric)")

	case perfv1.MetricsSourcePrometheus:
		if spec.Prometheus == nil || spec.Prometheus.URL == "" {
			return nil, "", fmt.Errorf("metrics.source is prometheus but spec.metrics.prometheus.url is not set")
		}
		p, err := prometheusFor(ctx, spec, interval, promAPI)
		if err != nil {
			return nil, "", fmt.Errorf("metrics.source is prometheus: %w", err)
		}
		return p, fmt.Sprintf("metrics.source is prometheus: querying %s", spec.Prometheus.URL), nil

	case perfv1.MetricsSourceAuto, "":
		if spec.Prometheus == nil || spec.Prometheus.URL == "" {
			return useMetricsServer("metrics.source is auto and spec.metrics.prometheus is not set: reading metrics.k8s.io (no heap metric)")
		}
		if spec.Queries != nil {
			if err := QueriesFromSpec(spec.Queries).Validate(); err != nil {
				return nil, "", fmt.Errorf("spec.metrics.queries: %w", err)
			}
		}
		p, err := prometheusFor(ctx, spec, interval, promAPI)
		if err != nil {
			return useMetricsServer(fmt.Sprintf("metrics.source is auto and Prometheus is not usable (%v): reading metrics.k8s.io (no heap metric)", err))
		}
		return p, fmt.Sprintf("metrics.source is auto and Prometheus at %s answers: querying it", spec.Prometheus.URL), nil

	default:
		return nil, "", fmt.Errorf("unknown metrics.source %q: want auto, metrics-server or prometheus", spec.Source)
	}
}

// prometheusFor validates the queries, makes the client and checks that the
// server answers.
func prometheusFor(ctx context.Context, spec perfv1.MetricsSpec, interval time.Duration, promAPI func(string) (promv1.API, error)) (Provider, error) {
	q := QueriesFromSpec(spec.Queries)
	if err := q.Validate(); err != nil {
		return nil, fmt.Errorf("spec.metrics.queries: %w", err)
	}
	url := spec.Prometheus.URL
	api, err := promAPI(url)
	if err != nil {
		return nil, fmt.Errorf("prometheus client for %s: %w", url, err)
	}
	ctx, cancel := context.WithTimeout(ctx, ReachableTimeout)
	defer cancel()
	if err := Reachable(ctx, api); err != nil {
		return nil, fmt.Errorf("%s unreachable: %w", url, err)
	}
	return NewPrometheus(api, q, WithInterval(interval)), nil
}
