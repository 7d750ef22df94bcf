package controllers

import (
	"fmt"
	"net/url"
	"path"
	"strings"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
)

// AllowList is what the operator's installer lets experiment authors point
// it at: the operator sends queries to a Prometheus URL and runs the k6 image
// an experiment names, with its own network position and a pod in the
// experiment's namespace. An empty list allows anything.
type AllowList struct {
	// PrometheusURLs are scheme://host[:port] of the Prometheus servers
	// experiments may query (spec.metrics.prometheus.url).
	PrometheusURLs []string
	// K6Images are glob patterns (path.Match) of the images the load Jobs may
	// run (spec.load.k6.image), such as grafana/k6:*.
	K6Images []string
}

// refuses says why the installer does not allow what exp names, or "".
func (a AllowList) refuses(exp *perfv1.PerfExperiment) string {
	if p := exp.Spec.Metrics.Prometheus; p != nil && len(a.PrometheusURLs) > 0 && exp.Spec.Metrics.Source != perfv1.MetricsSourceMetricsServer {
		if !a.prometheusAllowed(p.URL) {
			return fmt.Sprintf("spec.metrics.prometheus.url %q is not one of the Prometheus servers this operator may query (%s): ask its installer to add it (Helm value allowedPrometheusURLs)",
				p.URL, strings.Join(a.PrometheusURLs, ", "))
		}
	}
	if img := exp.Spec.Load.K6.Image; len(a.K6Images) > 0 && !a.imageAllowed(img) {
		return fmt.Sprintf("spec.load.k6.image %q matches none of the images this operator may run (%s): ask its installer to add it (Helm value allowedK6Images)",
			img, strings.Join(a.K6Images, ", "))
	}
	return ""
}

func (a AllowList) prometheusAllowed(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	for _, allowed := range a.PrometheusURLs {
		w, err := url.Parse(allowed)
		if err == nil && strings.EqualFold(w.Scheme, u.Scheme) && strings.EqualFold(w.Host, u.Host) {
			return true
		}
	}
	return false
}

func (a AllowList) imageAllowed(img string) bool {
	for _, pattern := range a.K6Images {
		if ok, err := path.Match(pattern, img); err == nil && ok {
			return true
		}
	}
	return false
}
