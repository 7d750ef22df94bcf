package metrics

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsclientset "k8s.io/metrics/pkg/client/clientset/versioned"
)

// MetricsServerName is the metrics.k8s.io provider's Name.
const MetricsServerName = "metrics-server"

// NewMetricsServer returns a provider that reads metrics.k8s.io/v1beta1
// PodMetrics: one List per Sample in the target's namespace with its label
// selector. CPUCores is the container's usage.cpu, WorkingSetBytes its
// usage.memory (metrics-server reports the working set), HeapBytes is NaN.
//
// Only pods named in Target.Pods (when it is not empty) and only
// Target.Container are reported; a pod without that container is left out.
//
// Time: metrics-server's usage.cpu is the rate over [timestamp-window, timestamp]
// and usage.memory the value at timestamp, so the timestamp is the end of the
// measured window, the same convention as the Prometheus provider's evaluation
// time (adding window/2 would put it after the data). All samples of one call
// carry one Time, the latest of the pods' timestamps, so a consumer can group a
// call's samples as one instant (pods on different nodes are scraped a few
// seconds apart). A repeated call before metrics-server's next scrape returns
// the same Time, which tells the caller nothing new was measured.
func NewMetricsServer(c metricsclientset.Interface) Provider {
	return &metricsServer{c: c}
}

type metricsServer struct{ c metricsclientset.Interface }

func (m *metricsServer) Name() string { return MetricsServerName }

func (m *metricsServer) Sample(ctx context.Context, t Target) ([]Sample, error) {
	if err := checkTarget(t); err != nil {
		return nil, fmt.Errorf("metrics-server: %w", err)
	}
	list, err := m.c.MetricsV1beta1().PodMetricses(t.Namespace).List(ctx, metav1.ListOptions{LabelSelector: t.PodSelector})
	if err != nil {
		return nil, metricsServerError(t, err)
	}
	var out []Sample
	var latest time.Time
	var window time.Duration
	for i := range list.Items {
		pm := &list.Items[i]
		if len(t.Pods) > 0 && !slices.Contains(t.Pods, pm.Name) {
			continue
		}
		idx := slices.IndexFunc(pm.Containers, func(c metricsv1beta1.ContainerMetrics) bool { return c.Name == t.Container })
		if idx < 0 {
			continue
		}
		usage := pm.Containers[idx].Usage
		s := Sample{Pod: pm.Name, CPUCores: Unknown, WorkingSetBytes: Unknown, HeapBytes: Unknown, GCSecondsPerSecond: Unknown}
		cpu, hasCPU := usage[corev1.ResourceCPU]
		mem, hasMem := usage[corev1.ResourceMemory]
		if !hasCPU && !hasMem {
			continue
		}
		if hasCPU {
			s.CPUCores = cpu.AsApproximateFloat64()
		}
		if hasMem {
			s.WorkingSetBytes = mem.AsApproximateFloat64()
		}
		if pm.Timestamp.After(latest) {
			latest = pm.Timestamp.Time
		}
		window = max(window, pm.Window.Duration)
		out = append(out, s)
	}
	for i := range out {
		out[i].Time, out[i].Window = latest, window
	}
	slices.SortFunc(out, func(a, b Sample) int { return strings.Compare(a.Pod, b.Pod) })
	return out, nil
}

// metricsServerError says what was listed and, for an API error, its HTTP
// status, with a hint for the usual cause of each.
func metricsServerError(t Target, err error) error {
	what := fmt.Sprintf("metrics-server: listing metrics.k8s.io/v1beta1 PodMetrics in namespace %q with selector %q", t.Namespace, t.PodSelector)
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return fmt.Errorf("%s: %w", what, err)
	}
	code := status.Status().Code
	hint := ""
	switch {
	case apierrors.IsNotFound(err):
		hint = " (is metrics-server installed and its APIService v1beta1.metrics.k8s.io registered?)"
	case apierrors.IsServiceUnavailable(err):
		hint = " (the APIService v1beta1.metrics.k8s.io is registered but its backend does not answer)"
	case apierrors.IsForbidden(err):
		hint = " (the operator's role needs get/list on pods.metrics.k8s.io)"
	}
	return fmt.Errorf("%s: HTTP %d: %w%s", what, code, err, hint)
}
