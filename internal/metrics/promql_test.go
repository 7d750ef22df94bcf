package metrics

import (
	"regexp"
	"strings"
	"testing"
	"time"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
)

func TestDefaultQueriesExpand(t *testing.T) {
	v := templateValues{namespace: "shop", container: "app", pods: []string{"api-b", "api-a", "api-a"}, rng: time.Minute}
	sel := `namespace="shop",pod=~"^(?:api-a|api-b)$",container="app"`
	want := map[string]string{
		"cpu":    `sum by (pod) (rate(container_cpu_usage_seconds_total{` + sel + `}[1m]))`,
		"memory": `sum by (pod) (container_memory_working_set_bytes{` + sel + `})`,
		"heap": `sum by (pod) (jvm_memory_used_bytes{area="heap",` + sel + `})` +
			"\nor " + `sum by (pod) (jvm_memory_used_bytes{jvm_memory_type="heap",` + sel + `})` +
			"\nor " + `sum by (pod) (jvm_memory_bytes_used{area="heap",` + sel + `})` +
			"\nor " + `sum by (pod) (go_memstats_heap_alloc_bytes{` + sel + `})`,
		"gc": `sum by (pod) (rate(jvm_gc_collection_seconds_sum{` + sel + `}[1m]))` +
			"\nor " + `sum by (pod) (rate(jvm_gc_pause_seconds_sum{` + sel + `}[1m]))` +
			"\nor " + `sum by (pod) (rate(jvm_gc_duration_seconds_sum{` + sel + `}[1m]))` +
			"\nor " + `sum by (pod) (rate(go_gc_duration_seconds_sum{` + sel + `}[1m]))`,
	}
	for _, m := range DefaultQueries().each() {
		got, err := expand(m.tmpl, v)
		if err != nil {
			t.Fatalf("%s: %v", m.name, err)
		}
		if got != want[m.name] {
			t.Errorf("%s:\n got %s\nwant %s", m.name, got, want[m.name])
		}
	}
	if err := DefaultQueries().Validate(); err != nil {
		t.Error(err)
	}
}

func TestExpandEscapesEveryContext(t *testing.T) {
	tests := []struct {
		name string
		tmpl string
		v    templateValues
		want string
	}{
		{"double-quoted namespace closes nothing", `x{namespace="{{namespace}}"}`,
			templateValues{namespace: `a"} or vector(1) #`},
			`x{namespace="a\"} or vector(1) #"}`},
		{"backslash before the quote", `x{namespace="{{namespace}}"}`,
			templateValues{namespace: `a\`},
			`x{namespace="a\\"}`},
		{"newline cannot end a line comment trick", `x{container="{{container}}"}`,
			templateValues{container: "a\n) or vector(1) #"},
			`x{container="a\n) or vector(1) #"}`},
		{"control and non-printable runes", `x{container="{{container}}"}`,
			templateValues{container: "\x00\x7f\u00a0\u2028\U000e0001\xff"},
			`x{container="\u0000\u007f\u00a0\u2028\U000e0001\xff"}`},
		{"single quotes escape the single quote, not the double", `x{namespace='{{namespace}}'}`,
			templateValues{namespace: `a'b"c`},
			`x{namespace='a\'b"c'}`},
		{"raw string takes the value as is", "x{namespace=`{{namespace}}`}",
			templateValues{namespace: `a"b\c`},
			"x{namespace=`a\"b\\c`}"},
		{"pod regex is quoted and then string-escaped", `x{pod=~"{{pod}}"}`,
			templateValues{pods: []string{`a.b`, `c|d`, `e"f`, `g\h`, `.*`}},
			`x{pod=~"^(?:\\.\\*|a\\.b|c\\|d|e\"f|g\\\\h)$"}`},
		{"spaces inside braces", `x{namespace="{{ namespace }}"}[{{ range }}]`,
			templateValues{namespace: "n", rng: 90 * time.Second},
			`x{namespace="n"}[1m30s]`},
		{"values are not expanded again", `x{namespace="{{namespace}}",container="{{container}}"}`,
			templateValues{namespace: "{{container}}", container: "{{namespace}}"},
			`x{namespace="{{container}}",container="{{namespace}}"}`},
		{"escaped quote inside a string keeps the context", `x{a="q\"{{namespace}}"}`,
			templateValues{namespace: `"`},
			`x{a="q\"\""}`},
		{"a quote of the other kind keeps the context", `x{a="it's {{namespace}}"}`,
			templateValues{namespace: `"`},
			`x{a="it's \""}`},
		{"comments are left alone", "x # for {{pod}} in \"{{namespace}}\"\n+ y{n=\"{{namespace}}\"}",
			templateValues{namespace: `"`},
			"x # for {{pod}} in \"{{namespace}}\"\n+ y{n=\"\\\"\"}"},
		{"a # inside a string is no comment", `x{a="#{{namespace}}"}`,
			templateValues{namespace: `"`},
			`x{a="#\""}`},
		{"non-placeholder braces pass", `x{a="{{"} + y{b="}}"}`,
			templateValues{},
			`x{a="{{"} + y{b="}}"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.v.pods == nil {
				tc.v.pods = []string{"p"}
			}
			got, err := expand(tc.tmpl, tc.v)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestExpandRefuses(t *testing.T) {
	v := templateValues{namespace: "n", container: "c", pods: []string{"p"}, rng: time.Minute}
	tests := []struct {
		name, tmpl string
		v          templateValues
		want       string
	}{
		{"namespace outside a string", `x{namespace={{namespace}}}`, v, "must be inside a quoted string"},
		{"pod outside a string", `x{pod=~{{pod}}}`, v, "must be inside a quoted string"},
		{"range inside a string", `x[1m] offset "{{range}}"`, v, "belongs outside strings"},
		{"unknown placeholder", `x{a="{{namesapce}}"}`, v, "unknown placeholder"},
		{"unterminated string", `x{a="{{namespace}}}`, v, "unterminated"},
		{"backtick value in a raw string", "x{a=`{{namespace}}`}", templateValues{namespace: "a`b", pods: []string{"p"}}, "backtick"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := expand(tc.tmpl, tc.v)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("expand(%q) = %q, %v; want an error containing %q", tc.tmpl, got, err, tc.want)
			}
		})
	}
}

// TestPodRegexMatchesOnlyItsPods checks, with Go's RE2 (Prometheus' engine),
// that hostile pod names match only themselves.
func TestPodRegexMatchesOnlyItsPods(t *testing.T) {
	pods := []string{"web.1", "a|b", "x.*", "(", "[a-z]", "p+", `\d`, "^$", "dup", "dup"}
	re := regexp.MustCompile(PodRegex(pods))
	for _, p := range pods {
		if !re.MatchString(p) {
			t.Errorf("%q does not match its own regex %s", p, re)
		}
	}
	for _, other := range []string{"webx1", "a", "b", "x", "xyz", "", "q", "pp", "5", "dupdup", "web.10", "aweb.1"} {
		if re.MatchString(other) {
			t.Errorf("%q matches %s", other, re)
		}
	}
}

func TestQueriesFromSpec(t *testing.T) {
	d := DefaultQueries()
	if got := QueriesFromSpec(nil); got != d {
		t.Errorf("nil spec: %+v", got)
	}
	got := QueriesFromSpec(&perfv1.MetricQueries{Heap: `h{pod=~"{{pod}}"}`})
	if got.CPU != d.CPU || got.Memory != d.Memory || got.Heap != `h{pod=~"{{pod}}"}` {
		t.Errorf("heap override: %+v", got)
	}
	err := Queries{CPU: d.CPU, Memory: `m{pod={{pod}}}`, Heap: d.Heap}.Validate()
	if err == nil || !strings.HasPrefix(err.Error(), "memory query: placeholder {{pod}} at offset 6") {
		t.Errorf("Validate: %v", err)
	}
	if err := (Queries{CPU: d.CPU, Memory: " ", Heap: d.Heap}).Validate(); err == nil {
		t.Error("an empty query validated")
	}
}
