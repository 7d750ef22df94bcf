package controllers

import (
	"context"

	metricsclientset "k8s.io/metrics/pkg/client/clientset/versioned"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
	"perfexp.dev/perf-operator/internal/metrics"
)

// ClusterMetrics resolves spec.metrics against the cluster: Prometheus when asked
// for (or, with source auto, when configured and reachable), metrics.k8s.io
// otherwise.
type ClusterMetrics struct {
	MetricsServer metricsclientset.Interface
}

// Provider implements MetricsSource.
func (c ClusterMetrics) Provider(ctx context.Context, spec perfv1.MetricsSpec) (metrics.Provider, string, error) {
	return metrics.Choose(ctx, spec, metrics.NewPrometheusAPI, c.MetricsServer)
}
