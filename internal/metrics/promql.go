package metrics

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/prometheus/common/model"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
)

// Queries are PromQL templates, one per metric, each returning one series per
// pod that carries a `pod` label (aggregate with `sum by (pod)`, or rename a
// differently named label with label_replace).
//
// Placeholders, replaced in one pass (a substituted value is never scanned again):
//
//   - {{namespace}} and {{container}}: the target's namespace and container name,
//     for use inside a quoted PromQL string: namespace="{{namespace}}".
//   - {{pod}}: an anchored regular expression that matches exactly the target's
//     pod names, ^(?:name-1|name-2)$ with every name escaped by
//     regexp.QuoteMeta, for use inside a quoted string after =~: pod=~"{{pod}}".
//   - {{range}}: the rate window as a PromQL duration such as 1m (see
//     perfv1.RateRange), for use outside strings: rate(x[{{range}}]).
//
// The expansion knows PromQL's lexical contexts. A value from the target is
// escaped for the string literal it lands in ("…" or '…': backslash, the quote
// character, newlines and every other control or non-printable character; `…`
// cannot escape, so a value containing a backtick is refused), so no namespace,
// pod or container name can end the string and change the query. A target
// placeholder outside a string, {{range}} inside one, or an unknown placeholder
// is an error. Placeholders inside # comments are left as they are.
type Queries struct {
	CPU, Memory, Heap, GC string
}

// cadvisorSelector selects the target's container in the cAdvisor series that
// kube-prometheus-stack scrapes from the kubelet.
const cadvisorSelector = `namespace="{{namespace}}",pod=~"{{pod}}",container="{{container}}"`

// heapDefault sums the heap in use per pod from whichever runtime metric the
// pod exports. `or` keeps the left-hand series for a pod that has several, so
// the order is the preference: Prometheus client_java 1.x and Micrometer, then
// the OpenTelemetry semantic-convention name, then the legacy client_java 0.x
// (simpleclient_hotspot) name, then the Go runtime.
var heapDefault = strings.Join([]string{
	`sum by (pod) (jvm_memory_used_bytes{area="heap",` + cadvisorSelector + `})`,
	`sum by (pod) (jvm_memory_used_bytes{jvm_memory_type="heap",` + cadvisorSelector + `})`,
	`sum by (pod) (jvm_memory_bytes_used{area="heap",` + cadvisorSelector + `})`,
	`sum by (pod) (go_memstats_heap_alloc_bytes{` + cadvisorSelector + `})`,
}, "\nor ")

// gcDefault is the share of time each pod's runtime spent in garbage
// collection, from whichever timing the pod exports, in the same order of
// preference as heapDefault: client_java (0.x and 1.x: the collectors'
// accumulated collection time), Micrometer's pause timer, the OpenTelemetry
// semantic-convention duration, the Go runtime's stop-the-world pauses.
var gcDefault = strings.Join([]string{
	`sum by (pod) (rate(jvm_gc_collection_seconds_sum{` + cadvisorSelector + `}[{{range}}]))`,
	`sum by (pod) (rate(jvm_gc_pause_seconds_sum{` + cadvisorSelector + `}[{{range}}]))`,
	`sum by (pod) (rate(jvm_gc_duration_seconds_sum{` + cadvisorSelector + `}[{{range}}]))`,
	`sum by (pod) (rate(go_gc_duration_seconds_sum{` + cadvisorSelector + `}[{{range}}]))`,
}, "\nor ")

// DefaultQueries are the queries for kube-prometheus-stack: cAdvisor's
// container_cpu_usage_seconds_total and container_memory_working_set_bytes (the
// same working set metrics-server reports), the JVM or Go heap, and the time
// spent in GC.
func DefaultQueries() Queries {
	return Queries{
		CPU:    `sum by (pod) (rate(container_cpu_usage_seconds_total{` + cadvisorSelector + `}[{{range}}]))`,
		Memory: `sum by (pod) (container_memory_working_set_bytes{` + cadvisorSelector + `})`,
		Heap:   heapDefault,
		GC:     gcDefault,
	}
}

// QueriesFromSpec returns the default queries with the ones spec.metrics.queries
// sets in their place.
func QueriesFromSpec(q *perfv1.MetricQueries) Queries {
	out := DefaultQueries()
	if q == nil {
		return out
	}
	if q.CPU != "" {
		out.CPU = q.CPU
	}
	if q.Memory != "" {
		out.Memory = q.Memory
	}
	if q.Heap != "" {
		out.Heap = q.Heap
	}
	if q.GC != "" {
		out.GC = q.GC
	}
	return out
}

// Validate expands every template with a sample target and reports the first
// misuse of a placeholder, naming the query. It does not parse PromQL: the
// server does that, and its error names the query too.
func (q Queries) Validate() error {
	v := templateValues{namespace: "ns", container: "c", pods: []string{"p"}, rng: time.Minute}
	for _, m := range q.each() {
		if strings.TrimSpace(m.tmpl) == "" {
			return fmt.Errorf("%s query is empty", m.name)
		}
		if _, err := expand(m.tmpl, v); err != nil {
			return fmt.Errorf("%s query: %w", m.name, err)
		}
	}
	return nil
}

type namedQuery struct{ name, tmpl string }

func (q Queries) each() []namedQuery {
	return []namedQuery{{"cpu", q.CPU}, {"memory", q.Memory}, {"heap", q.Heap}, {"gc", q.GC}}
}

// templateValues are the raw values a template's placeholders stand for.
type templateValues struct {
	namespace, container string
	pods                 []string
	rng                  time.Duration
}

// PodRegex is the anchored regular expression matching exactly the given pod
// names (sorted, duplicates removed, each escaped with regexp.QuoteMeta).
func PodRegex(pods []string) string {
	names := slices.Clone(pods)
	slices.Sort(names)
	names = slices.Compact(names)
	for i, p := range names {
		names[i] = regexp.QuoteMeta(p)
	}
	return "^(?:" + strings.Join(names, "|") + ")$"
}

var placeholder = regexp.MustCompile(`^\{\{\s*([A-Za-z_]+)\s*\}\}`)

// lexical states of expand: outside strings, inside a comment, or inside a
// string opened by the quote character itself.
const (
	lexCode    = 0
	lexComment = '#'
)

// expand replaces the placeholders of tmpl in one left-to-right pass while
// tracking PromQL's string and comment contexts, escaping each value for the
// context it lands in.
func expand(tmpl string, v templateValues) (string, error) {
	var b strings.Builder
	state := byte(lexCode)
	for i := 0; i < len(tmpl); {
		c := tmpl[i]
		if c == '{' && state != lexComment {
			if m := placeholder.FindStringSubmatch(tmpl[i:]); m != nil {
				s, err := v.substitute(m[1], state)
				if err != nil {
					return "", fmt.Errorf("placeholder %s at offset %d: %w", m[0], i, err)
				}
				b.WriteString(s)
				i += len(m[0])
				continue
			}
		}
		switch state {
		case lexCode:
			switch c {
			case '"', '\'', '`', '#':
				state = c
			}
		case '"', '\'':
			if c == '\\' && i+1 < len(tmpl) {
				b.WriteString(tmpl[i : i+2])
				i += 2
				continue
			}
			if c == state {
				state = lexCode
			}
		case '`':
			if c == '`' {
				state = lexCode
			}
		case lexComment:
			if c == '\n' {
				state = lexCode
			}
		}
		b.WriteByte(c)
		i++
	}
	if state != lexCode && state != lexComment {
		return "", fmt.Errorf("unterminated %c string", state)
	}
	return b.String(), nil
}

func (v templateValues) substitute(name string, state byte) (string, error) {
	var raw string
	switch name {
	case "namespace":
		raw = v.namespace
	case "container":
		raw = v.container
	case "pod":
		raw = PodRegex(v.pods)
	case "range":
		if state != lexCode {
			return "", fmt.Errorf("{{range}} is a duration and belongs outside strings, as in rate(x[{{range}}])")
		}
		return model.Duration(v.rng).String(), nil
	default:
		return "", fmt.Errorf("unknown placeholder; known are {{namespace}}, {{pod}}, {{container}} and {{range}}")
	}
	switch state {
	case '"', '\'':
		return escapeString(raw, state), nil
	case '`':
		if strings.Contains(raw, "`") {
			return "", fmt.Errorf("value %q contains a backtick, which a `raw` PromQL string cannot hold; use a double-quoted string", raw)
		}
		return raw, nil
	default:
		return "", fmt.Errorf("must be inside a quoted string, as in %s=\"{{%s}}\", so its value can be escaped", name, name)
	}
}

// escapeString escapes s for the inside of a PromQL string literal opened with
// quote (" or '). PromQL strings take Go's escapes, so besides the backslash and
// the quote every control or non-printable rune is written as \n, \t, \xNN,
// \uNNNN or \UNNNNNNNN and no raw newline or quote ever reaches the query.
func escapeString(s string, quote byte) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\\':
			b.WriteString(`\\`)
		case r == rune(quote):
			b.WriteByte('\\')
			b.WriteByte(quote)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x10000 && !unicode.IsPrint(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		case !unicode.IsPrint(r):
			fmt.Fprintf(&b, `\U%08x`, r)
		default:
			b.WriteRune(r)
		}
		i += size
	}
	return b.String()
}
