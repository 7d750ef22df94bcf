package toggle

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
)

// defaultTimeout applies when the toggle has no timeout, the CRD's default.
var defaultTimeout, _ = perfv1.DefaultHTTPToggleTimeout.Parse()

// Sender sends runtime (http) toggles to the target's pods.
type Sender struct {
	// Client sends the requests; nil means a client that reaches pod IPs
	// directly (no proxy), follows no redirects and keeps no idle connections.
	// Tests inject one whose transport dials httptest servers.
	Client *http.Client
}

// directClient is the zero Sender's client. Pod IPs are only reachable from
// inside the cluster, so an HTTP(S)_PROXY in the operator's environment must not
// apply; a redirect is an answer the toggle did not ask for, so it is reported,
// not followed; and toggles are rare, so idle keep-alive connections (two
// goroutines each) would only cost memory across many experiments.
var directClient = &http.Client{
	Transport: &http.Transport{
		Proxy:                  nil,
		DisableKeepAlives:      true,
		TLSHandshakeTimeout:    10 * time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	},
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

func (s Sender) client() *http.Client {
	if s.Client != nil {
		return s.Client
	}
	return directClient
}

// Apply sends the toggle's request to every pod at scheme://IP:port+path; a 2xx
// answer is success. It returns the names of all pods, in order, when all
// accepted. A pod that answered non-2xx refused, and is not sent the revert;
// one that gave no answer (timeout, reset) may still have been served, and is.
// The rest is the contract of the runtime toggles (see applyAll).
func (s Sender) Apply(ctx context.Context, h *perfv1.HTTPToggle, pods []Pod) (applied []string, err error) {
	timeout, err := requestTimeout(h)
	if err != nil {
		return nil, err
	}
	return applyAll(ctx, pods, s.switcher(h, &h.HTTPRequest, timeout), s.switcher(h, &h.Revert, timeout))
}

// Revert sends the toggle's revert request to every pod, whatever happens to the
// others, and returns all failures joined; FailedPods lists their pods.
func (s Sender) Revert(ctx context.Context, h *perfv1.HTTPToggle, pods []Pod) error {
	timeout, err := requestTimeout(h)
	if err != nil {
		return err
	}
	return revertAll(ctx, pods, s.switcher(h, &h.Revert, timeout))
}

// switcher sends req to one pod.
func (s Sender) switcher(h *perfv1.HTTPToggle, req *perfv1.HTTPRequest, timeout time.Duration) podSwitch {
	return func(ctx context.Context, p Pod) *PodError { return s.send(ctx, h, req, timeout, p) }
}

func requestTimeout(h *perfv1.HTTPToggle) (time.Duration, error) {
	d, err := h.Timeout.Parse()
	if err != nil {
		return 0, fmt.Errorf("toggle.http.timeout %q %v", h.Timeout, err)
	}
	if d <= 0 {
		return defaultTimeout, nil
	}
	return d, nil
}

// send sends one request and reads at most a snippet of a refusing answer.
func (s Sender) send(ctx context.Context, h *perfv1.HTTPToggle, r *perfv1.HTTPRequest, timeout time.Duration, p Pod) *PodError {
	method, scheme := r.Method, h.Scheme
	if method == "" {
		method = http.MethodPost
	}
	if scheme == "" {
		scheme = "http"
	}
	if p.IP == "" {
		return &PodError{Pod: p.Name, Err: errors.New("the pod has no IP yet")}
	}
	// JoinHostPort brackets IPv6 addresses: http://[fd00::1]:8080/path.
	target := scheme + "://" + net.JoinHostPort(p.IP, strconv.Itoa(int(h.Port))) + r.Path
	pe := &PodError{Pod: p.Name, Method: method, URL: target}

	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var body io.Reader
	if r.Body != "" {
		body = strings.NewReader(r.Body)
	}
	req, err := http.NewRequestWithContext(rctx, method, target, body)
	if err != nil {
		pe.Err = err
		return pe
	}
	for _, hd := range r.Headers {
		if strings.EqualFold(hd.Name, "Host") {
			req.Host = hd.Value // net/http ignores a Host entry in Header
		} else {
			req.Header.Add(hd.Name, hd.Value)
		}
	}
	resp, err := s.client().Do(req)
	if err != nil {
		pe.Err = transportError(ctx, rctx, err, timeout)
		return pe
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	pe.StatusCode = resp.StatusCode
	pe.Body = snippet(resp.Body)
	return pe
}

// transportError says "no answer within 5s" for the request's own timeout, and
// otherwise strips the method and URL that *url.Error repeats from PodError.
func transportError(ctx, rctx context.Context, err error, timeout time.Duration) error {
	if ctx.Err() == nil && errors.Is(rctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("no answer within %s: %w", timeout, context.DeadlineExceeded)
	}
	var ue *url.Error
	if errors.As(err, &ue) && ue.Err != nil {
		return ue.Err
	}
	return err
}

// snippet reads the start of a body for an error message: valid UTF-8, trimmed,
// marked when cut.
func snippet(r io.Reader) string {
	b, _ := io.ReadAll(io.LimitReader(r, snippetLen+1))
	return trimSnippet(b)
}
