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
	"sync"
	"sync/atomic"
	"time"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
)

const (
	// maxInFlight bounds the requests one call has open at once: enough to switch
	// a large Deployment in a few round trips, small enough that many experiments
	// toggling together stay within the operator's goroutine budget.
	maxInFlight = 8
	// snippetLen is how much of a refusing answer's body goes into the error,
	// enough for a typical error line without flooding a condition message.
	snippetLen = 256
	// maxListed is how many pod errors a message lists before "and N more".
	maxListed = 5
)

// defaultTimeout applies when the toggle has no timeout, the CRD's default.
var defaultTimeout, _ = perfv1.DefaultHTTPToggleTimeout.Parse()

// Pod is a target pod a runtime toggle is sent to.
type Pod struct {
	Name string
	IP   string
}

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

// PodError is the failure of one pod's request. StatusCode is 0 when the pod
// gave no answer (connection refused, timeout, cancellation); then Err says why.
type PodError struct {
	Pod        string
	Method     string
	URL        string
	StatusCode int
	// Body is the start of the answer's body, trimmed to a short snippet.
	Body string
	Err  error
}

func (e *PodError) Error() string {
	if e.StatusCode != 0 {
		msg := fmt.Sprintf("pod %s: %s %s answered %d %s", e.Pod, e.Method, e.URL, e.StatusCode, http.StatusText(e.StatusCode))
		if e.Body != "" {
			msg += fmt.Sprintf(": %q", e.Body)
		}
		return msg
	}
	if e.URL == "" {
		return fmt.Sprintf("pod %s: %v", e.Pod, e.Err)
	}
	return fmt.Sprintf("pod %s: %s %s: %v", e.Pod, e.Method, e.URL, e.Err)
}

func (e *PodError) Unwrap() error { return e.Err }

// FailedPods returns the names of the pods whose requests failed in an error
// returned by Revert, so the caller can keep just those in status.toggle.pods and
// retry them.
func FailedPods(err error) []string {
	var names []string
	var walk func(error)
	walk = func(err error) {
		if pe, ok := err.(*PodError); ok {
			names = append(names, pe.Pod)
			return
		}
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e)
			}
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		}
	}
	if err != nil {
		walk(err)
	}
	return names
}

// Apply sends the toggle's request to every pod at scheme://IP:port+path; a 2xx
// answer is success. It returns the names of all pods, in order, when all
// accepted.
//
// On any failure it stops starting new requests, sends the revert to every pod
// the toggle may have reached (those that accepted, and those that gave no
// answer, since a timed-out request may still have been served; not those that
// answered non-2xx) and returns an error naming each failing pod with its status
// and the start of its body. Then applied lists the pods on which the toggle may
// still be on because their revert failed too: the caller must record them and
// keep reverting. It is nil when the compensation succeeded.
func (s Sender) Apply(ctx context.Context, h *perfv1.HTTPToggle, pods []Pod) (applied []string, err error) {
	timeout, err := requestTimeout(h)
	if err != nil {
		return nil, err
	}
	if len(pods) == 0 {
		// Switching no pod would measure nothing and report it as the toggle's cost.
		return nil, errors.New("no target pods to send the toggle to")
	}
	res := s.sendAll(ctx, h, &h.HTTPRequest, timeout, pods, true)
	var failures []error
	var undo []Pod
	for i, r := range res {
		if r.err != nil {
			failures = append(failures, r.err)
		}
		if r.sent && (r.err == nil || r.err.StatusCode == 0) {
			undo = append(undo, pods[i])
		}
	}
	if len(failures) == 0 {
		names := make([]string, len(pods))
		for i, p := range pods {
			names[i] = p.Name
		}
		return names, nil
	}
	applyErr := fmt.Errorf("applying the toggle failed on %d of %d pods: %w", len(failures), len(pods), joinErrors(failures))
	if len(undo) == 0 {
		return nil, applyErr
	}
	revertErr := s.revert(ctx, h, timeout, undo)
	if revertErr == nil {
		return nil, applyErr
	}
	return FailedPods(revertErr), fmt.Errorf("%w; reverting the pods it reached failed too: %w", applyErr, revertErr)
}

// Revert sends the toggle's revert request to every pod, whatever happens to the
// others, and returns all failures joined; FailedPods lists their pods.
func (s Sender) Revert(ctx context.Context, h *perfv1.HTTPToggle, pods []Pod) error {
	timeout, err := requestTimeout(h)
	if err != nil {
		return err
	}
	return s.revert(ctx, h, timeout, pods)
}

func (s Sender) revert(ctx context.Context, h *perfv1.HTTPToggle, timeout time.Duration, pods []Pod) error {
	var failures []error
	for _, r := range s.sendAll(ctx, h, &h.Revert, timeout, pods, false) {
		if r.err != nil {
			failures = append(failures, r.err)
		}
	}
	if len(failures) == 0 {
		return nil
	}
	return fmt.Errorf("reverting the toggle failed on %d of %d pods: %w", len(failures), len(pods), joinErrors(failures))
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

// outcome is what happened to one pod's request. sent is false when the request
// was never started (the context ended, or an earlier failure stopped Apply).
type outcome struct {
	sent bool
	err  *PodError
}

// sendAll sends req to the pods with at most maxInFlight requests open and
// returns one outcome per pod, in order. With failFast, no new request starts
// after one has failed, so fewer pods need the compensating revert.
func (s Sender) sendAll(ctx context.Context, h *perfv1.HTTPToggle, req *perfv1.HTTPRequest, timeout time.Duration, pods []Pod, failFast bool) []outcome {
	out := make([]outcome, len(pods))
	sem := make(chan struct{}, maxInFlight)
	var wg sync.WaitGroup
	var failed atomic.Bool
	for i, p := range pods {
		// Waiting for a slot is bounded: every open request ends within its
		// timeout, or at once when ctx ends.
		sem <- struct{}{}
		if err := ctx.Err(); err != nil {
			<-sem
			out[i].err = &PodError{Pod: p.Name, Err: fmt.Errorf("not sent: %w", err)}
			continue
		}
		if failFast && failed.Load() {
			<-sem
			continue
		}
		out[i].sent = true
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := s.send(ctx, h, req, timeout, p); err != nil {
				out[i].err = err
				failed.Store(true)
			}
		}()
	}
	wg.Wait()
	return out
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
	s := strings.ToValidUTF8(string(b), "?")
	cut := len(b) > snippetLen
	if cut {
		s = strings.ToValidUTF8(string(b[:snippetLen]), "")
	}
	s = strings.TrimSpace(s)
	if cut {
		s += "…"
	}
	return s
}

// joinedErrors joins errors with "; " on one line, for condition messages, and
// lists at most maxListed of them; errors.Is, errors.As and FailedPods still
// see all of them.
type joinedErrors []error

func joinErrors(errs []error) error { return joinedErrors(errs) }

func (j joinedErrors) Error() string {
	parts := make([]string, 0, maxListed+1)
	for i, e := range j {
		if i == maxListed {
			parts = append(parts, fmt.Sprintf("and %d more", len(j)-maxListed))
			break
		}
		parts = append(parts, e.Error())
	}
	return strings.Join(parts, "; ")
}

func (j joinedErrors) Unwrap() []error { return j }
