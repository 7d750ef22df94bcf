package controllers

import (
	"strings"
	"testing"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
)

func TestAllowListRefusesWhatTheInstallerDidNotAllow(t *testing.T) {
	allow := AllowList{
		PrometheusURLs: []string{"http://prometheus-operated.monitoring:9090"},
		K6Images:       []string{"grafana/k6:*", "registry.local/k6@sha256:*"},
	}
	exp := func(prom, image string) *perfv1.PerfExperiment {
		e := &perfv1.PerfExperiment{}
		e.Spec.Load.K6.Image = image
		if prom != "" {
			e.Spec.Metrics.Prometheus = &perfv1.PrometheusSpec{URL: prom}
		}
		return e
	}
	for _, tc := range []struct {
		name, prom, image, want string
	}{
		{"allowed", "http://prometheus-operated.monitoring:9090", "grafana/k6:1.8.1", ""},
		{"allowed with a path", "http://PROMETHEUS-operated.monitoring:9090/", "registry.local/k6@sha256:abc", ""},
		{"no prometheus", "", "grafana/k6:1.8.1", ""},
		{"another host", "http://10.0.0.1:9090", "grafana/k6:1.8.1", `spec.metrics.prometheus.url "http://10.0.0.1:9090"`},
		{"another port", "http://prometheus-operated.monitoring:9091", "grafana/k6:1.8.1", "spec.metrics.prometheus.url"},
		{"another scheme", "https://prometheus-operated.monitoring:9090", "grafana/k6:1.8.1", "spec.metrics.prometheus.url"},
		{"another image", "", "evil/miner:latest", `spec.load.k6.image "evil/miner:latest"`},
		{"a lookalike image", "", "grafana/k6-evil:1", "spec.load.k6.image"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := allow.refuses(exp(tc.prom, tc.image))
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Fatalf("refuses = %q; want %q", got, tc.want)
			}
		})
	}
	if got := (AllowList{}).refuses(exp("http://anything:1", "any/image")); got != "" {
		t.Fatalf("an empty allow-list refused: %q", got)
	}
}
