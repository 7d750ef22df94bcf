package chart

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"perfexp.dev/perf-operator/internal/testenv"
)

// promtool finds Prometheus' rule checker on PATH, or installs Debian's
// prometheus package with hack/prometheus.sh (as `make test` does up front).
func promtool(t *testing.T) string {
	t.Helper()
	_, tool, err := testenv.PrometheusBinaries(t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	return tool
}

// ruleGroups extracts the rule groups of the rendered PrometheusRule as a
// Prometheus rule file.
func ruleGroups(t *testing.T) (file string, groups []any) {
	t.Helper()
	pr := only(t, render(t, "-f", "test/chart/testdata/monitoring.yaml"), "PrometheusRule")
	groups, ok, err := unstructured.NestedSlice(pr.Object, "spec", "groups")
	if err != nil || !ok || len(groups) == 0 {
		t.Fatalf("PrometheusRule has no spec.groups: %v", err)
	}
	b, err := yaml.Marshal(map[string]any{"groups": groups})
	if err != nil {
		t.Fatal(err)
	}
	file = filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return file, groups
}

// The alerting rules are valid PromQL and valid Prometheus rules.
func TestPrometheusRulesPassPromtoolCheck(t *testing.T) {
	file, _ := ruleGroups(t)
	out, err := exec.Command(promtool(t), "check", "rules", file).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}

// The alerts fire for what they are named after, and only for it: promtool's
// rule unit tests evaluate them on synthetic series as the operator exports
// them (endings by phase and reason, reconcile errors by controller), scraped
// by the chart's ServiceMonitor into the release namespace.
func TestPrometheusRulesFireOnTheirCauses(t *testing.T) {
	file, groups := ruleGroups(t)
	annotations := map[string]map[string]string{}
	for _, g := range groups {
		rules, _, _ := unstructured.NestedSlice(g.(map[string]any), "rules")
		for _, r := range rules {
			r := r.(map[string]any)
			a, _, _ := unstructured.NestedStringMap(r, "annotations")
			annotations[r["alert"].(string)] = a
		}
	}
	// expanded fills in the {{ $labels.reason }} the alerts' texts use.
	expanded := func(alert, reason string) map[string]string {
		out := map[string]string{}
		for k, v := range annotations[alert] {
			out[k] = strings.ReplaceAll(v, "{{ $labels.reason }}", reason)
		}
		return out
	}
	ns := namespace
	series := func(labels, values string) map[string]string {
		return map[string]string{"series": labels, "values": values}
	}
	alert := func(labels map[string]string, ann map[string]string) map[string]any {
		labels["team"] = "perf" // alertLabels in testdata/monitoring.yaml
		return map[string]any{"exp_labels": labels, "exp_annotations": ann}
	}
	tests := map[string]any{
		"rule_files":          []string{file},
		"evaluation_interval": "1m",
		"tests": []any{map[string]any{
			"interval": "1m",
			"input_series": []any{
				// A heap-growth abort at minute 10 and a requested abort at 12.
				series(fmt.Sprintf(`perfexp_experiment_endings_total{namespace=%q,phase="Aborted",reason="HeapGrowth"}`, ns), "0x9 1x30"),
				series(fmt.Sprintf(`perfexp_experiment_endings_total{namespace=%q,phase="Aborted",reason="AbortRequested"}`, ns), "0x11 1x30"),
				// Successes never alert; nor does another install's namespace.
				series(fmt.Sprintf(`perfexp_experiment_endings_total{namespace=%q,phase="Succeeded",reason="Succeeded"}`, ns), "0 1 2 3 4 5 6 7 8 9 10x30"),
				series(`perfexp_experiment_endings_total{namespace="elsewhere",phase="Aborted",reason="OOMKilled"}`, "0x9 1x30"),
				// Reconcile errors rising steadily from minute 5; another
				// controller's errors do not count.
				series(fmt.Sprintf(`controller_runtime_reconcile_errors_total{namespace=%q,controller="perfexperiment"}`, ns), "0x5 1+1x35"),
				series(fmt.Sprintf(`controller_runtime_reconcile_errors_total{namespace=%q,controller="other"}`, ns), "0+5x40"),
			},
			"alert_rule_test": []any{
				map[string]any{"eval_time": "8m", "alertname": "PerfExperimentGuardrailBreached", "exp_alerts": []any{}},
				map[string]any{"eval_time": "11m", "alertname": "PerfExperimentGuardrailBreached", "exp_alerts": []any{
					alert(map[string]string{"alertname": "PerfExperimentGuardrailBreached", "namespace": ns, "reason": "HeapGrowth", "severity": "critical"},
						expanded("PerfExperimentGuardrailBreached", "HeapGrowth")),
				}},
				map[string]any{"eval_time": "11m", "alertname": "PerfExperimentAborted", "exp_alerts": []any{}},
				map[string]any{"eval_time": "13m", "alertname": "PerfExperimentAborted", "exp_alerts": []any{
					alert(map[string]string{"alertname": "PerfExperimentAborted", "namespace": ns, "reason": "AbortRequested", "severity": "warning"},
						expanded("PerfExperimentAborted", "AbortRequested")),
				}},
				// window is 30m in testdata/monitoring.yaml: gone 30m after.
				map[string]any{"eval_time": "41m", "alertname": "PerfExperimentGuardrailBreached", "exp_alerts": []any{}},
				// Pending until the errors have lasted reconcileErrorsFor (15m).
				map[string]any{"eval_time": "15m", "alertname": "PerfOperatorReconcileErrors", "exp_alerts": []any{}},
				map[string]any{"eval_time": "25m", "alertname": "PerfOperatorReconcileErrors", "exp_alerts": []any{
					alert(map[string]string{"alertname": "PerfOperatorReconcileErrors", "namespace": ns, "severity": "warning"},
						annotations["PerfOperatorReconcileErrors"]),
				}},
			},
		}},
	}
	b, err := yaml.Marshal(tests)
	if err != nil {
		t.Fatal(err)
	}
	testFile := filepath.Join(filepath.Dir(file), "rules_test.yaml")
	if err := os.WriteFile(testFile, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(promtool(t), "test", "rules", testFile).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool test rules: %v\n%s\nunit tests:\n%s", err, out, b)
	}
	t.Logf("%s", out)
}

// allowedMetrics are the series the dashboard may query: the operator's own
// (including the window-latency and toggle gauges), cAdvisor's container series,
// JVM and Go heap series the target apps export, and kube-state-metrics' for the
// Deployment picker — all of which kube-prometheus-stack collects.
var allowedMetrics = map[string]string{
	"perfexp_experiments":                       "operator",
	"perfexp_experiment_endings_total":          "operator",
	"perfexp_guardrail_evaluations_total":       "operator",
	"perfexp_windows_total":                     "operator",
	"perfexp_window_latency_seconds":            "operator",
	"perfexp_toggle_applied":                    "operator",
	"container_cpu_usage_seconds_total":         "cAdvisor",
	"container_memory_working_set_bytes":        "cAdvisor",
	"jvm_memory_used_bytes":                     "JVM",
	"go_memstats_heap_inuse_bytes":              "Go",
	"go_memstats_heap_alloc_bytes":              "Go",
	"kube_deployment_spec_replicas":             "kube-state-metrics",
	"controller_runtime_reconcile_total":        "operator (controller-runtime)",
	"controller_runtime_reconcile_errors_total": "operator (controller-runtime)",
}

// promqlNoise is what metricNames strips before looking for names: strings,
// label matchers, ranges, grouping clauses and Grafana variables.
var promqlNoise = []*regexp.Regexp{
	regexp.MustCompile(`"(?:[^"\\]|\\.)*"`),
	regexp.MustCompile(`\{[^}]*\}`),
	regexp.MustCompile(`\[[^\]]*\]`),
	regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`),
	regexp.MustCompile(`\$\{?\w+\}?`),
}

var (
	promqlIdent    = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*(?:\s*\()?`)
	promqlKeywords = []string{"and", "or", "unless", "bool", "offset", "inf", "nan"}
)

// metricNames lists the metric names a PromQL expression (or a Grafana
// label_values() query) selects: identifiers left once strings, matchers,
// ranges and grouping are stripped, that are neither functions nor keywords.
func metricNames(expr string) []string {
	for _, re := range promqlNoise {
		expr = re.ReplaceAllString(expr, " ")
	}
	var out []string
	for _, id := range promqlIdent.FindAllString(expr, -1) {
		if strings.HasSuffix(id, "(") || slices.Contains(promqlKeywords, strings.ToLower(id)) {
			continue
		}
		out = append(out, id)
	}
	return out
}

func TestMetricNamesParser(t *testing.T) {
	for expr, want := range map[string][]string{
		`sum by (pod) (rate(container_cpu_usage_seconds_total{namespace="$namespace",pod=~"$deployment-.*",container!=""}[1m]))`: {"container_cpu_usage_seconds_total"},
		`label_values(kube_deployment_spec_replicas{namespace="$namespace"}, deployment)`:                                        {"kube_deployment_spec_replicas", "deployment"},
		`changes(perfexp_toggle_applied{experiment="$experiment"}[1m]) > 0 and on (namespace) up`:                                {"perfexp_toggle_applied", "up"},
		`increase(perfexp_experiment_endings_total[$__rate_interval])`:                                                           {"perfexp_experiment_endings_total"},
	} {
		if got := metricNames(expr); !slices.Equal(got, want) {
			t.Errorf("metricNames(%s) = %v, want %v", expr, got, want)
		}
	}
}

// queries collects every PromQL string of a Grafana dashboard: panel targets,
// annotation queries and the queries of "query" template variables.
func queries(t *testing.T, dash map[string]any) []string {
	t.Helper()
	var out []string
	panels, _, _ := unstructured.NestedSlice(dash, "panels")
	for _, p := range panels {
		targets, _, _ := unstructured.NestedSlice(p.(map[string]any), "targets")
		for _, tg := range targets {
			out = append(out, tg.(map[string]any)["expr"].(string))
		}
	}
	anns, _, _ := unstructured.NestedSlice(dash, "annotations", "list")
	for _, a := range anns {
		if e, ok := a.(map[string]any)["expr"].(string); ok {
			out = append(out, e)
		}
	}
	vars, _, _ := unstructured.NestedSlice(dash, "templating", "list")
	for _, v := range vars {
		v := v.(map[string]any)
		if v["type"] != "query" {
			continue
		}
		q, ok := v["query"].(string)
		if !ok {
			q, _, _ = unstructured.NestedString(v, "query", "query")
		}
		out = append(out, q)
	}
	if len(out) < 8 {
		t.Fatalf("found only %d queries in the dashboard: %q", len(out), out)
	}
	return out
}

// The dashboard is valid JSON, queries only known metrics, has the panels and
// variables the README promises, and is what the ConfigMap carries.
func TestDashboard(t *testing.T) {
	path := filepath.Join(chart, "dashboards", "perf-experiment.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var dash map[string]any
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("%s is not JSON: %v", path, err)
	}
	qs := queries(t, dash)
	used := map[string]bool{}
	for _, q := range qs {
		names := metricNames(q)
		if strings.HasPrefix(strings.TrimSpace(q), "label_values(") && len(names) > 0 {
			names = names[:1] // the second argument is a label name
		}
		for _, n := range names {
			used[n] = true
			if _, ok := allowedMetrics[n]; !ok {
				t.Errorf("query %q uses %s, which is not in the allow-list", q, n)
			}
		}
	}
	for _, m := range []string{"perfexp_experiments", "perfexp_window_latency_seconds", "perfexp_toggle_applied",
		"container_cpu_usage_seconds_total", "container_memory_working_set_bytes", "jvm_memory_used_bytes", "go_memstats_heap_inuse_bytes"} {
		if !used[m] {
			t.Errorf("the dashboard never queries %s", m)
		}
	}
	var vars []string
	tmpl, _, _ := unstructured.NestedSlice(dash, "templating", "list")
	for _, v := range tmpl {
		vars = append(vars, v.(map[string]any)["name"].(string))
	}
	for _, v := range []string{"namespace", "experiment", "deployment"} {
		if !slices.Contains(vars, v) {
			t.Errorf("no template variable %s; have %v", v, vars)
		}
	}
	ann, _, _ := unstructured.NestedSlice(dash, "annotations", "list")
	if !slices.ContainsFunc(ann, func(a any) bool {
		expr, _ := a.(map[string]any)["expr"].(string)
		return strings.Contains(expr, "changes(perfexp_toggle_applied")
	}) {
		t.Error("no annotation marks the toggle moments (changes(perfexp_toggle_applied...))")
	}
	cm := only(t, render(t, "-f", "test/chart/testdata/monitoring.yaml"), "ConfigMap")
	data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
	if strings.TrimSpace(data["perf-experiment.json"]) != strings.TrimSpace(string(raw)) {
		t.Error("the dashboard ConfigMap does not carry dashboards/perf-experiment.json as it is")
	}
}
