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

	"perfexp.dev/perf-operator/internal/metrics"
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
	// expanded fills in the {{ $labels.reason }} the alerts' texts use, and the
	// experiments their query of perfexp_experiment_info names.
	expanded := func(alert, reason string, experiments ...string) map[string]string {
		out := map[string]string{}
		for k, v := range annotations[alert] {
			v = namedExperiments.ReplaceAllLiteralString(v, " "+strings.Join(experiments, " "))
			out[k] = strings.ReplaceAll(v, "{{ $labels.reason }}", reason)
		}
		return out
	}
	for _, a := range []string{"PerfExperimentGuardrailBreached", "PerfExperimentAborted"} {
		if !namedExperiments.MatchString(annotations[a]["description"]) {
			t.Errorf("%s's description does not name the experiments: %q", a, annotations[a]["description"])
		}
	}
	for a, ann := range annotations {
		if want := "#" + strings.ToLower(a); !strings.HasSuffix(ann["runbook_url"], want) {
			t.Errorf("%s's runbook_url %q does not end in %s", a, ann["runbook_url"], want)
		}
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
				// A heap-growth abort at minute 9 and a requested abort at 11,
				// the first of their kind: the series are absent until then
				// (a Prometheus that began scraping after the operator's start
				// sees them so, and so did the operator before it exported
				// every ending at 0).
				series(fmt.Sprintf(`perfexp_experiment_endings_total{namespace=%q,phase="Aborted",reason="HeapGrowth"}`, ns), "_x9 1x30"),
				series(fmt.Sprintf(`perfexp_experiment_endings_total{namespace=%q,phase="Aborted",reason="AbortRequested"}`, ns), "_x11 1x30"),
				// As the operator exports them from its start: 0, then an
				// OOM kill at minute 21; a toggle never fails.
				series(fmt.Sprintf(`perfexp_experiment_endings_total{namespace=%q,phase="Aborted",reason="OOMKilled"}`, ns), "0x20 1x20"),
				series(fmt.Sprintf(`perfexp_experiment_endings_total{namespace=%q,phase="Aborted",reason="ToggleFailed"}`, ns), "0x40"),
				// The experiments' info series, which the descriptions name.
				series(`perfexp_experiment_info{namespace="shop",experiment="leaky",phase="Aborted",verdict="Inconclusive",reason="HeapGrowth"}`, "_x9 1x30"),
				series(`perfexp_experiment_info{namespace="shop",experiment="stopped",phase="Aborted",verdict="Inconclusive",reason="AbortRequested"}`, "_x11 1x30"),
				series(`perfexp_experiment_info{namespace="team-a",experiment="oom",phase="Aborted",verdict="Inconclusive",reason="OOMKilled"}`, "_x21 1x20"),
				series(`perfexp_experiment_info{namespace="shop",experiment="fine",phase="Succeeded",verdict="Pass",reason=""}`, "1x40"),
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
						expanded("PerfExperimentGuardrailBreached", "HeapGrowth", "shop/leaky")),
				}},
				map[string]any{"eval_time": "10m", "alertname": "PerfExperimentAborted", "exp_alerts": []any{}},
				map[string]any{"eval_time": "13m", "alertname": "PerfExperimentAborted", "exp_alerts": []any{
					alert(map[string]string{"alertname": "PerfExperimentAborted", "namespace": ns, "reason": "AbortRequested", "severity": "warning"},
						expanded("PerfExperimentAborted", "AbortRequested", "shop/stopped")),
				}},
				// The pre-initialised series: nothing while it stays 0, an alert
				// once it turns 1 (beside the heap-growth one, still in its window).
				map[string]any{"eval_time": "20m", "alertname": "PerfExperimentGuardrailBreached", "exp_alerts": []any{
					alert(map[string]string{"alertname": "PerfExperimentGuardrailBreached", "namespace": ns, "reason": "HeapGrowth", "severity": "critical"},
						expanded("PerfExperimentGuardrailBreached", "HeapGrowth", "shop/leaky")),
				}},
				map[string]any{"eval_time": "23m", "alertname": "PerfExperimentGuardrailBreached", "exp_alerts": []any{
					alert(map[string]string{"alertname": "PerfExperimentGuardrailBreached", "namespace": ns, "reason": "HeapGrowth", "severity": "critical"},
						expanded("PerfExperimentGuardrailBreached", "HeapGrowth", "shop/leaky")),
					alert(map[string]string{"alertname": "PerfExperimentGuardrailBreached", "namespace": ns, "reason": "OOMKilled", "severity": "critical"},
						expanded("PerfExperimentGuardrailBreached", "OOMKilled", "team-a/oom")),
				}},
				// window is 30m in testdata/monitoring.yaml: the heap-growth
				// alert is gone 30m after, the OOM one not yet.
				map[string]any{"eval_time": "40m", "alertname": "PerfExperimentGuardrailBreached", "exp_alerts": []any{
					alert(map[string]string{"alertname": "PerfExperimentGuardrailBreached", "namespace": ns, "reason": "OOMKilled", "severity": "critical"},
						expanded("PerfExperimentGuardrailBreached", "OOMKilled", "team-a/oom")),
				}},
				map[string]any{"eval_time": "42m", "alertname": "PerfExperimentAborted", "exp_alerts": []any{}},
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

// namedExperiments is the part of the abort alerts' descriptions that lists the
// aborted experiments from perfexp_experiment_info.
var namedExperiments = regexp.MustCompile(`\{\{ range query .*perfexp_experiment_info.*\{\{ end \}\}`)

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
	"perfexp_experiment_info":                   "operator",
	"perfexp_stage_overhead_ratio":              "operator",
	"container_cpu_usage_seconds_total":         "cAdvisor",
	"container_memory_working_set_bytes":        "cAdvisor",
	"jvm_memory_used_bytes":                     "JVM",
	"jvm_memory_bytes_used":                     "JVM (client_java 0.x)",
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
		"container_cpu_usage_seconds_total", "container_memory_working_set_bytes", "jvm_memory_used_bytes", "go_memstats_heap_alloc_bytes",
		"perfexp_experiment_info", "perfexp_stage_overhead_ratio"} {
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
	// The heap panel reads the series the operator's default heap query reads,
	// with the dashboard's variables in place of the target's pods and container.
	heap := strings.NewReplacer(`container="{{container}}"`, `container!=""`, "{{namespace}}", "$namespace", "{{pod}}", "$deployment-.*").
		Replace(metrics.DefaultQueries().Heap)
	panels, _, _ := unstructured.NestedSlice(dash, "panels")
	var heapExprs []string
	for _, p := range panels {
		if p.(map[string]any)["title"] != "Target heap" {
			continue
		}
		targets, _, _ := unstructured.NestedSlice(p.(map[string]any), "targets")
		for _, tg := range targets {
			heapExprs = append(heapExprs, tg.(map[string]any)["expr"].(string))
		}
	}
	if !slices.Equal(heapExprs, []string{heap}) {
		t.Errorf("the Target heap panel queries %q;\nthe operator's default heap query, with the dashboard's variables, is %q", heapExprs, heap)
	}
	cm := only(t, render(t, "-f", "test/chart/testdata/monitoring.yaml"), "ConfigMap")
	data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
	if strings.TrimSpace(data["perf-experiment.json"]) != strings.TrimSpace(string(raw)) {
		t.Error("the dashboard ConfigMap does not carry dashboards/perf-experiment.json as it is")
	}
}

// The local cluster's monitoring stack (hack/monitoring/stack.yaml, filled in as
// hack/monitoring.sh does) and the sample apps' PodMonitors are accepted by the
// apiserver with the pinned prometheus-operator's CRDs and strict field
// validation, so a mistake in them shows in make test, not only in make
// e2e-monitoring.
func TestLocalMonitoringManifestsPassServerSideDryRun(t *testing.T) {
	root := testenv.RepoRoot()
	b, err := os.ReadFile(filepath.Join(root, "hack", "monitoring", "stack.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	stack := strings.NewReplacer(
		"@OPERATOR_IMAGE@", "perfexp.dev/prometheus-operator:"+promOperatorVersion,
		"@RELOADER_IMAGE@", "perfexp.dev/prometheus-config-reloader:"+promOperatorVersion,
		"@PROMETHEUS_IMAGE@", "perfexp.dev/prometheus:v3.14.0",
		"@PROMETHEUS_VERSION@", "v3.14.0",
	).Replace(string(b))
	if left := regexp.MustCompile(`@[A-Z_]+@`).FindString(stack); left != "" {
		t.Fatalf("hack/monitoring/stack.yaml has a placeholder hack/monitoring.sh does not fill: %s", left)
	}
	monitors, err := os.ReadFile(filepath.Join(root, "examples", "local", "monitoring", "podmonitors.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	objs := append(decode(t, stack), decode(t, string(monitors))...)
	dryRun(t, objs)
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.GetKind())
	}
	t.Logf("%d objects dry-run: %v", len(objs), kinds)
}
