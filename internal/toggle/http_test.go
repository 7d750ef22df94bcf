package toggle

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
)

// seen is one request a fake pod received.
type seen struct {
	Method, URI, Host, Body string
	Header                  http.Header
}

// fakePod is an admin endpoint on 127.0.0.1 that records what it receives and
// answers with its handler.
type fakePod struct {
	srv  *httptest.Server
	mu   sync.Mutex
	reqs []seen
}

func newFakePod(t *testing.T, handler http.HandlerFunc) *fakePod {
	t.Helper()
	p := &fakePod{}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		p.mu.Lock()
		p.reqs = append(p.reqs, seen{r.Method, r.RequestURI, r.Host, string(b), r.Header.Clone()})
		p.mu.Unlock()
		handler(w, r)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

// methods lists the methods received, in order: with the toggle below, PUT is
// the apply and DELETE the revert.
func (p *fakePod) methods() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, r := range p.reqs {
		out = append(out, r.Method)
	}
	return out
}

func answer(status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

// byMethod answers the apply (PUT) and the revert (DELETE) differently.
func byMethod(apply, revert http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			revert(w, r)
			return
		}
		apply(w, r)
	}
}

// hang never answers before the client gives up.
func hang(w http.ResponseWriter, r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-time.After(10 * time.Second):
	}
}

// cluster maps fake pod IPs to fake pods. Its sender dials the pod's httptest
// server whenever a request is addressed to IP:8080, so the production code
// builds its URLs exactly as in a cluster, IPv6 included.
type cluster struct {
	pods  []Pod
	addrs map[string]string
}

func newCluster(fakes ...*fakePod) *cluster {
	c := &cluster{addrs: map[string]string{}}
	for i, f := range fakes {
		ip := fmt.Sprintf("10.0.0.%d", i+1)
		if i == 2 {
			ip = "fd00::3" // one IPv6 pod in every cluster of three or more
		}
		c.pods = append(c.pods, Pod{Name: fmt.Sprintf("p%d", i), IP: ip})
		c.addrs[net.JoinHostPort(ip, "8080")] = f.srv.Listener.Addr().String()
	}
	return c
}

func (c *cluster) sender() Sender {
	tr := &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			real, ok := c.addrs[addr]
			if !ok {
				return nil, fmt.Errorf("no fake pod at %s", addr)
			}
			var d net.Dialer
			return d.DialContext(ctx, network, real)
		},
	}
	return Sender{Client: &http.Client{Transport: tr}}
}

func profiling() *perfv1.HTTPToggle {
	return &perfv1.HTTPToggle{
		HTTPRequest: perfv1.HTTPRequest{
			Path: "/admin/profiling?mode=cpu", Method: http.MethodPut, Body: `{"enabled":true}`,
			Headers: []perfv1.HTTPHeader{{Name: "X-Token", Value: "s3cret"}, {Name: "Content-Type", Value: "application/json"}},
		},
		Port: 8080, Scheme: "http", Timeout: "2s",
		Revert: perfv1.HTTPRequest{Path: "/admin/profiling", Method: http.MethodDelete},
	}
}

func TestSenderApplyAll(t *testing.T) {
	fakes := []*fakePod{newFakePod(t, answer(200, "ok")), newFakePod(t, answer(204, "")), newFakePod(t, answer(202, ""))}
	c := newCluster(fakes...)
	applied, err := c.sender().Apply(context.Background(), profiling(), c.pods)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"p0", "p1", "p2"}; !reflect.DeepEqual(applied, want) {
		t.Errorf("applied = %v, want %v", applied, want)
	}
	for i, f := range fakes {
		if len(f.reqs) != 1 {
			t.Fatalf("pod %d got %d requests, want 1", i, len(f.reqs))
		}
		r := f.reqs[0]
		host := net.JoinHostPort(c.pods[i].IP, "8080")
		if r.Method != "PUT" || r.URI != "/admin/profiling?mode=cpu" || r.Body != `{"enabled":true}` || r.Host != host ||
			r.Header.Get("X-Token") != "s3cret" || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("pod %d got %+v", i, r)
		}
	}
	if got := fakes[2].reqs[0].Host; got != "[fd00::3]:8080" {
		t.Errorf("IPv6 pod addressed as %q", got)
	}
}

func TestSenderApplyOneFailsRevertsTheOther(t *testing.T) {
	ok := newFakePod(t, answer(200, ""))
	bad := newFakePod(t, answer(500, "profiler unavailable: agent not attached\n"))
	c := newCluster(ok, bad)
	applied, err := c.sender().Apply(context.Background(), profiling(), c.pods)
	if err == nil {
		t.Fatal("Apply succeeded, want an error")
	}
	for _, want := range []string{"1 of 2 pods", "pod p1", "PUT http://10.0.0.2:8080/admin/profiling?mode=cpu", "500 Internal Server Error", "profiler unavailable: agent not attached"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if applied != nil {
		t.Errorf("applied = %v, want nil: the revert succeeded", applied)
	}
	if got := ok.methods(); !reflect.DeepEqual(got, []string{"PUT", "DELETE"}) {
		t.Errorf("accepting pod got %v, want the apply then the revert", got)
	}
	if got := bad.methods(); !reflect.DeepEqual(got, []string{"PUT"}) {
		t.Errorf("refusing pod got %v, want the apply only", got)
	}
	var pe *PodError
	if !errors.As(err, &pe) || pe.Pod != "p1" || pe.StatusCode != 500 {
		t.Errorf("errors.As PodError = %+v", pe)
	}
}

func TestSenderApplyTimeout(t *testing.T) {
	ok := newFakePod(t, answer(200, ""))
	slow := newFakePod(t, byMethod(hang, answer(200, "")))
	c := newCluster(ok, slow)
	h := profiling()
	h.Timeout = "200ms"
	start := time.Now()
	applied, err := c.sender().Apply(context.Background(), h, c.pods)
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("Apply took %s with a 200ms timeout", took)
	}
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "pod p1") || !strings.Contains(err.Error(), "no answer within 200ms") {
		t.Fatalf("err = %v, want a timeout naming p1", err)
	}
	if applied != nil {
		t.Errorf("applied = %v, want nil", applied)
	}
	// A request that timed out may still have been served, so it is reverted too.
	for i, f := range []*fakePod{ok, slow} {
		if got := f.methods(); !reflect.DeepEqual(got, []string{"PUT", "DELETE"}) {
			t.Errorf("pod %d got %v, want the apply then the revert", i, got)
		}
	}
}

// TestSenderApplyCompensationFails: a pod that accepted but refuses the revert
// is returned, so the caller keeps it in status and retries.
func TestSenderApplyCompensationFails(t *testing.T) {
	stuck := newFakePod(t, byMethod(answer(200, ""), answer(503, "busy")))
	bad := newFakePod(t, answer(400, "bad mode"))
	c := newCluster(stuck, bad)
	applied, err := c.sender().Apply(context.Background(), profiling(), c.pods)
	if !reflect.DeepEqual(applied, []string{"p0"}) {
		t.Errorf("applied = %v, want [p0]", applied)
	}
	for _, want := range []string{"pod p1", "400 Bad Request", "bad mode", "reverting the pods it reached failed too", "pod p0", "503", "busy"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not mention %q", err, want)
		}
	}
}

func TestSenderApplyBodySnippet(t *testing.T) {
	long := strings.Repeat("x", 1000)
	c := newCluster(newFakePod(t, answer(502, "  "+long+"\n")))
	_, err := c.sender().Apply(context.Background(), profiling(), c.pods)
	var pe *PodError
	if !errors.As(err, &pe) {
		t.Fatalf("err = %v, want a PodError", err)
	}
	if want := strings.Repeat("x", snippetLen-2) + "…"; pe.Body != want {
		t.Errorf("body snippet = %q (%d bytes), want the first %d bytes trimmed and marked", pe.Body, len(pe.Body), snippetLen)
	}
	if len(err.Error()) > 600 {
		t.Errorf("error is %d bytes long", len(err.Error()))
	}
}

// TestSenderApplyStopsAfterFailure: once a pod refused, no new pod is switched
// on, so fewer pods need the compensating revert.
func TestSenderApplyStopsAfterFailure(t *testing.T) {
	// p0 refuses only once p1..p7 are in flight, so the loop is waiting for a
	// free slot; p1..p7 answer well after p0 has.
	var applies atomic.Int32
	allIn, p0Done := make(chan struct{}), make(chan struct{})
	slowOK := func(w http.ResponseWriter, r *http.Request) {
		if applies.Add(1) == maxInFlight-1 {
			close(allIn)
		}
		<-p0Done
		time.Sleep(200 * time.Millisecond)
	}
	refuse := func(w http.ResponseWriter, r *http.Request) {
		<-allIn
		w.WriteHeader(500)
		close(p0Done)
	}
	fakes := []*fakePod{newFakePod(t, byMethod(refuse, answer(200, "")))}
	for range 29 {
		fakes = append(fakes, newFakePod(t, byMethod(slowOK, answer(200, ""))))
	}
	c := newCluster(fakes...)
	_, err := c.sender().Apply(context.Background(), profiling(), c.pods)
	if err == nil {
		t.Fatal("Apply succeeded, want an error")
	}
	// p0 fails at once; p1..p7 were already in flight; nothing after starts.
	if n := applies.Load(); n != maxInFlight-1 {
		t.Errorf("%d pods accepted, want %d", n, maxInFlight-1)
	}
	for i, f := range fakes {
		want := 0
		if i >= 1 && i < maxInFlight {
			want = 2
		} else if i == 0 {
			want = 1
		}
		if got := len(f.methods()); got != want {
			t.Errorf("pod %d got %d requests, want %d", i, got, want)
		}
	}
}

func TestSenderRevertCollectsAllErrors(t *testing.T) {
	a := newFakePod(t, answer(500, "boom"))
	b := newFakePod(t, answer(200, ""))
	gone := newFakePod(t, answer(200, ""))
	d := newFakePod(t, answer(404, "no such endpoint"))
	c := newCluster(a, b, gone, d)
	gone.srv.Close() // connection refused
	err := c.sender().Revert(context.Background(), profiling(), c.pods)
	if err == nil {
		t.Fatal("Revert succeeded, want an error")
	}
	if got, want := FailedPods(err), []string{"p0", "p2", "p3"}; !reflect.DeepEqual(got, want) {
		t.Errorf("FailedPods = %v, want %v", got, want)
	}
	for _, want := range []string{"3 of 4 pods", "pod p0", "boom", "pod p2", "DELETE http://[fd00::3]:8080/admin/profiling", "pod p3", "404 Not Found"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	for i, f := range []*fakePod{a, b, d} {
		if got := f.methods(); !reflect.DeepEqual(got, []string{"DELETE"}) {
			t.Errorf("pod %d got %v, want one revert", i, got)
		}
	}
	if err := c.sender().Revert(context.Background(), profiling(), c.pods[1:2]); err != nil {
		t.Errorf("Revert of a healthy pod = %v", err)
	}
}

func TestSenderBoundedConcurrency(t *testing.T) {
	var inFlight, peak atomic.Int32
	pod := newFakePod(t, func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
		inFlight.Add(-1)
	})
	c := &cluster{addrs: map[string]string{}}
	for i := range 30 {
		ip := fmt.Sprintf("10.0.1.%d", i)
		c.pods = append(c.pods, Pod{Name: "p" + strconv.Itoa(i), IP: ip})
		c.addrs[ip+":8080"] = pod.srv.Listener.Addr().String()
	}
	if _, err := c.sender().Apply(context.Background(), profiling(), c.pods); err != nil {
		t.Fatal(err)
	}
	if err := c.sender().Revert(context.Background(), profiling(), c.pods); err != nil {
		t.Fatal(err)
	}
	if n := len(pod.methods()); n != 60 {
		t.Errorf("%d requests, want 60", n)
	}
	if p := peak.Load(); p > maxInFlight {
		t.Errorf("%d requests in flight at once, want at most %d", p, maxInFlight)
	}
}

func TestSenderContextCancelled(t *testing.T) {
	t.Run("before sending", func(t *testing.T) {
		pod := newFakePod(t, answer(200, ""))
		c := newCluster(pod)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		applied, err := c.sender().Apply(ctx, profiling(), c.pods)
		if !errors.Is(err, context.Canceled) || applied != nil || len(pod.methods()) != 0 {
			t.Errorf("Apply = %v, %v with %d requests; want context.Canceled, nothing sent", applied, err, len(pod.methods()))
		}
		err = c.sender().Revert(ctx, profiling(), c.pods)
		if !errors.Is(err, context.Canceled) || !reflect.DeepEqual(FailedPods(err), []string{"p0"}) {
			t.Errorf("Revert = %v, want context.Canceled naming p0", err)
		}
	})
	t.Run("while in flight", func(t *testing.T) {
		ok := newFakePod(t, answer(200, ""))
		slow := newFakePod(t, hang)
		c := newCluster(ok, slow)
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		applied, err := c.sender().Apply(ctx, profiling(), c.pods)
		if took := time.Since(start); took > time.Second {
			t.Errorf("Apply took %s after the context ended", took)
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("err = %v, want the context's error", err)
		}
		// The compensating revert could not be sent either: both pods may be on.
		if !reflect.DeepEqual(applied, []string{"p0", "p1"}) {
			t.Errorf("applied = %v, want [p0 p1]", applied)
		}
	})
}

func TestSenderRefusesBadInput(t *testing.T) {
	pod := newFakePod(t, answer(200, ""))
	c := newCluster(pod)
	badTimeout := profiling()
	badTimeout.Timeout = "soon"
	if _, err := c.sender().Apply(context.Background(), badTimeout, c.pods); err == nil || !strings.Contains(err.Error(), "timeout") {
		t.Errorf("bad timeout: err = %v", err)
	}
	if err := c.sender().Revert(context.Background(), badTimeout, c.pods); err == nil {
		t.Error("bad timeout: Revert succeeded")
	}
	if _, err := c.sender().Apply(context.Background(), profiling(), nil); err == nil || !strings.Contains(err.Error(), "no target pods") {
		t.Errorf("no pods: err = %v", err)
	}
	if err := c.sender().Revert(context.Background(), profiling(), nil); err != nil {
		t.Errorf("Revert of no pods = %v", err)
	}
	_, err := c.sender().Apply(context.Background(), profiling(), []Pod{{Name: "pending"}})
	if err == nil || !strings.Contains(err.Error(), "pod pending: the pod has no IP yet") {
		t.Errorf("no IP: err = %v", err)
	}
	if len(pod.methods()) != 0 {
		t.Errorf("requests were sent: %v", pod.methods())
	}
}

// TestZeroSender runs the production client against a real listener on
// 127.0.0.1: defaults fill the method and timeout, and a redirect is a failure,
// not followed.
func TestZeroSender(t *testing.T) {
	pod := newFakePod(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/moved" {
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
		}
	})
	_, port, _ := net.SplitHostPort(pod.srv.Listener.Addr().String())
	p, _ := strconv.Atoi(port)
	h := &perfv1.HTTPToggle{HTTPRequest: perfv1.HTTPRequest{Path: "/on"}, Port: int32(p), Revert: perfv1.HTTPRequest{Path: "/moved"}}
	pods := []Pod{{Name: "local", IP: "127.0.0.1"}}
	if applied, err := (Sender{}).Apply(context.Background(), h, pods); err != nil || len(applied) != 1 {
		t.Fatalf("Apply = %v, %v", applied, err)
	}
	if got := pod.reqs[0]; got.Method != "POST" || got.URI != "/on" {
		t.Errorf("got %+v, want POST /on", got)
	}
	err := Sender{}.Revert(context.Background(), h, pods)
	if err == nil || !strings.Contains(err.Error(), "302 Found") {
		t.Errorf("redirect: err = %v, want a 302 failure", err)
	}
	if n := len(pod.methods()); n != 2 {
		t.Errorf("%d requests, want 2 (the redirect is not followed)", n)
	}
}

func TestJoinedErrorsListsAFew(t *testing.T) {
	var errs []error
	for i := range 8 {
		errs = append(errs, &PodError{Pod: fmt.Sprint("p", i), Err: errors.New("refused")})
	}
	err := joinErrors(errs)
	if !strings.HasSuffix(err.Error(), "pod p4: refused; and 3 more") {
		t.Errorf("message = %q", err)
	}
	if got := FailedPods(fmt.Errorf("wrapped: %w", err)); len(got) != 8 {
		t.Errorf("FailedPods = %v, want all 8", got)
	}
}
