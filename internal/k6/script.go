package k6

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
)

// ScriptKey is the key of run.js in the operator's ConfigMap.
const ScriptKey = "run.js"

//go:embed run.js.tmpl
var scriptTemplateText string

// The placeholders of run.js.tmpl, each there once. They are filled by plain
// substitution (scriptParts.fill), not by text/template: a template calls methods
// by name through reflection, and a binary that can do that keeps every
// exported method of every type it links, since the linker cannot tell which
// one a template might call. With text/template the manager was 47 MB, without
// it 36 MB (the client-go API types' and gonum's unused methods), and the
// binary's pages are a third of its RSS (docs/scale.md).
const (
	placeholderExperiment = "{{.Experiment}}"
	placeholderUserModule = "{{.UserModule}}"
	placeholderConfig     = "{{.Config}}"
)

// gracefulStopMargin is added to the request timeout to make k6's gracefulStop:
// every iteration started within the window then finishes or times out, and is
// counted, before k6 stops.
const gracefulStopMargin = 5 * time.Second

// scriptConfig is the part of run.js that depends on the spec. It is JSON in the
// script, so Go, not a template, escapes every user-provided string.
type scriptConfig struct {
	GracefulStop string          `json:"gracefulStop"`
	Histogram    histogramConfig `json:"histogram"`
	Requests     []scriptRequest `json:"requests"`
}

type histogramConfig struct {
	MinMs   float64 `json:"minMs"`
	Growth  float64 `json:"growth"`
	Buckets int     `json:"buckets"`
}

// scriptRequest is one generated request, in the order http.request takes it.
type scriptRequest struct {
	Method string        `json:"method"`
	URL    string        `json:"url"`
	Weight int32         `json:"weight"`
	Body   *string       `json:"body"`
	Params requestParams `json:"params"`
}

// requestParams are k6's request parameters. Redirects are not followed: each
// iteration is then exactly one request, timed once. Bodies are discarded: the
// generated load checks no content, and k6 still reads them, so timing is unchanged.
type requestParams struct {
	Headers      map[string]string `json:"headers,omitempty"`
	TimeoutMs    int64             `json:"timeout"`
	Redirects    int               `json:"redirects"`
	ResponseType string            `json:"responseType"`
}

// ScriptConfigMap returns the ConfigMap holding the experiment's run.js. Its
// content depends only on the spec, so it is the same on every reconcile. Owner
// references are left to the caller.
func ScriptConfigMap(exp *perfv1.PerfExperiment) (*corev1.ConfigMap, error) {
	script, err := renderScript(exp)
	if err != nil {
		return nil, err
	}
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name:      ScriptConfigMapName(exp.Name),
			Namespace: exp.Namespace,
			Labels: map[string]string{
				perfv1.LabelExperiment: ExperimentLabelValue(exp.Name),
				LabelManagedBy:         ManagedBy,
			},
		},
		Data: map[string]string{ScriptKey: script},
	}, nil
}

// renderScript generates run.js for the experiment's load spec.
func renderScript(exp *perfv1.PerfExperiment) (string, error) {
	parts, err := partsOf(exp)
	if err != nil {
		return "", err
	}
	return parts.fill(), nil
}

// scriptParts are the values of run.js.tmpl's placeholders.
type scriptParts struct {
	Experiment string
	UserModule string
	Config     string
}

// fill writes the parts into the template in one pass: a part that holds a
// placeholder's text (a header value, a body) is written as it is, not
// substituted again.
func (p scriptParts) fill() string {
	return strings.NewReplacer(
		placeholderExperiment, p.Experiment,
		placeholderUserModule, p.UserModule,
		placeholderConfig, p.Config,
	).Replace(scriptTemplateText)
}

func partsOf(exp *perfv1.PerfExperiment) (scriptParts, error) {
	load := &exp.Spec.Load
	timeout, err := load.Timeout.Parse()
	if err != nil {
		return scriptParts{}, fmt.Errorf("spec.load.timeout: %w", err)
	}
	if timeout <= 0 {
		return scriptParts{}, fmt.Errorf("spec.load.timeout is not set: call Default() on the experiment first")
	}
	cfg := scriptConfig{
		GracefulStop: (timeout + gracefulStopMargin).String(),
		Histogram: histogramConfig{
			MinMs:   histogramMinMs,
			Growth:  histogramGrowth,
			Buckets: bucketCount(timeout),
		},
		Requests: []scriptRequest{},
	}
	userModule := "const user = null;"
	switch {
	case load.ScriptRef != nil && len(load.Requests) == 0:
		// The user's ConfigMap is mounted next to /scripts, so the relative import
		// resolves the same in a pod and in a test that lays out the same tree.
		path, _ := json.Marshal("../" + userScriptDir + "/" + load.ScriptRef.Key)
		userModule = "import * as user from " + string(path) + ";"
	case load.ScriptRef == nil && len(load.Requests) > 0:
		if cfg.Requests, err = generatedRequests(exp.Spec.Target.URL, load.Requests, timeout); err != nil {
			return scriptParts{}, err
		}
	default:
		return scriptParts{}, fmt.Errorf("spec.load must set exactly one of requests and scriptRef")
	}
	config, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return scriptParts{}, err
	}
	return scriptParts{Experiment: exp.Namespace + "/" + exp.Name, UserModule: userModule, Config: string(config)}, nil
}

// generatedRequests resolves the spec's requests against the target's base URL.
func generatedRequests(baseURL string, specs []perfv1.RequestSpec, timeout time.Duration) ([]scriptRequest, error) {
	if baseURL == "" {
		return nil, fmt.Errorf("spec.target.url is required with spec.load.requests")
	}
	base := strings.TrimRight(baseURL, "/")
	out := make([]scriptRequest, 0, len(specs))
	for i, r := range specs {
		if r.Weight < 1 || r.Method == "" {
			return nil, fmt.Errorf("spec.load.requests[%d] has no method or weight: call Default() on the experiment first", i)
		}
		req := scriptRequest{
			Method: r.Method,
			URL:    base + r.Path,
			Weight: r.Weight,
			Params: requestParams{
				TimeoutMs:    timeout.Milliseconds(),
				Redirects:    0,
				ResponseType: "none",
			},
		}
		switch r.Method {
		case "POST", "PUT", "PATCH":
			body := r.Body
			req.Body = &body
		}
		if len(r.Headers) > 0 {
			// k6 takes headers as an object: of repeated names, the last wins.
			req.Params.Headers = make(map[string]string, len(r.Headers))
			for _, h := range r.Headers {
				req.Params.Headers[h.Name] = h.Value
			}
		}
		out = append(out, req)
	}
	return out, nil
}

// bucketCount is how many histogram buckets run.js declares: enough for a request
// that takes its whole timeout and a quarter more (k6 stops a request a little
// after its timeout); anything slower lands in the last bucket.
func bucketCount(timeout time.Duration) int {
	ms := float64(timeout) / float64(time.Millisecond) * 1.25
	return bucketIndex(ms, histogramMinMs, histogramGrowth) + 1
}
