package controllers_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
	"perfexp.dev/perf-operator/internal/toggle"
)

// The target pods' admin port and the fake IPs envtest gives them. The IPs are
// never dialled: the injected transport routes every connection to one httptest
// server on 127.0.0.1.
const adminPort = 8081

var fakePods = []struct{ name, ip string }{{"app-1", "10.99.0.1"}, {"app-2", "10.99.0.2"}}

// adminCall is one request a target pod's admin endpoint received.
type adminCall struct {
	method, path, body string
	at                 time.Time // the fake clock when it arrived
}

// adminServer plays the admin endpoints of all target pods. Requests are told
// apart by the fake IP:port they were addressed to (the Host the operator put in
// its URL), which the transport also checks against the address it was asked to
// dial.
type adminServer struct {
	t     *testing.T
	srv   *httptest.Server
	clock *clocktesting.FakeClock
	// refuse answers 500 to the "on" request addressed to this IP:port.
	refuse string
	// onSeen is closed when a pod other than refuse got its first "on".
	onSeen   chan struct{}
	seenOnce sync.Once

	mu     sync.Mutex
	calls  map[string][]adminCall // by IP:port
	dialed []string               // addresses the operator asked to dial
}

func newAdminServer(t *testing.T, clock *clocktesting.FakeClock, refuse string) *adminServer {
	t.Helper()
	a := &adminServer{t: t, clock: clock, refuse: refuse, onSeen: make(chan struct{}), calls: map[string][]adminCall{}}
	a.srv = httptest.NewServer(http.HandlerFunc(a.serve))
	t.Cleanup(a.srv.Close)
	if host, _, _ := net.SplitHostPort(a.srv.Listener.Addr().String()); host != "127.0.0.1" {
		t.Fatalf("httptest server listens on %s, want 127.0.0.1", a.srv.Listener.Addr())
	}
	return a
}

func fakeAddr(ip string) string { return net.JoinHostPort(ip, fmt.Sprint(adminPort)) }

func (a *adminServer) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	call := adminCall{method: r.Method, path: r.URL.RequestURI(), body: string(b), at: a.clock.Now()}
	a.mu.Lock()
	a.calls[r.Host] = append(a.calls[r.Host], call)
	a.mu.Unlock()
	if call.body != "on" {
		return
	}
	if r.Host != a.refuse {
		a.seenOnce.Do(func() { close(a.onSeen) })
		return
	}
	// Refuse only once the other pod has accepted, whatever order the operator
	// sends in, so the compensating revert always has a pod to reach. Bounded:
	// the toggle's own timeout is longer.
	select {
	case <-a.onSeen:
	case <-time.After(5 * time.Second):
	}
	w.WriteHeader(http.StatusInternalServerError)
	_, _ = io.WriteString(w, "profiler unavailable: agent not attached\n")
}

// sender routes every connection addressed to a fake pod to the httptest
// server and records the address; any other address is refused, so nothing but
// 127.0.0.1 is ever dialled.
func (a *adminServer) sender() toggle.Sender {
	known := map[string]bool{}
	for _, p := range fakePods {
		known[fakeAddr(p.ip)] = true
	}
	real := a.srv.Listener.Addr().String()
	tr := &http.Transport{
		Proxy:             nil,
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			a.mu.Lock()
			a.dialed = append(a.dialed, addr)
			a.mu.Unlock()
			if !known[addr] {
				return nil, fmt.Errorf("no fake pod at %s", addr)
			}
			var d net.Dialer
			return d.DialContext(ctx, network, real)
		},
	}
	return toggle.Sender{Client: &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// bodies lists the bodies one pod received, in order.
func (a *adminServer) bodies(ip string) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for _, c := range a.calls[fakeAddr(ip)] {
		out = append(out, c.body)
	}
	return out
}

func (a *adminServer) callsOf(ip string) []adminCall {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]adminCall(nil), a.calls[fakeAddr(ip)]...)
}

// assertOnlyFakePods checks that every dial was for a fake pod's admin port
// and that no request reached the server under another Host.
func (a *adminServer) assertOnlyFakePods(wantDials int) {
	a.t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	known := map[string]bool{}
	for _, p := range fakePods {
		known[fakeAddr(p.ip)] = true
	}
	for _, d := range a.dialed {
		if !known[d] {
			a.t.Errorf("the operator dialled %s", d)
		}
	}
	for host := range a.calls {
		if !known[host] {
			a.t.Errorf("a request reached the admin server for Host %s", host)
		}
	}
	if len(a.dialed) != wantDials {
		a.t.Errorf("%d connections dialled (%v); want %d, one per request", len(a.dialed), a.dialed, wantDials)
	}
}

// newHTTPDriver is newDriver with an injected toggle sender.
func newHTTPDriver(t *testing.T, refuse string) (*driver, *adminServer) {
	clock := newTestClock()
	admin := newAdminServer(t, clock, refuse)
	return newDriverWith(t, clock, runtimeToggles{http: admin.sender()}), admin
}

// targetPods creates the target's pods, as the ReplicaSet and the kubelet
// would: the Deployment's pod labels, a fake IP, Running and Ready.
func targetPods(t *testing.T, ns string, dep *appsv1.Deployment) {
	t.Helper()
	ctx := context.Background()
	for _, p := range fakePods {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: ns, Labels: dep.Spec.Template.Labels},
			Spec:       *dep.Spec.Template.Spec.DeepCopy(),
		}
		if err := k8s.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		pod.Status = corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: p.ip, PodIPs: []corev1.PodIP{{IP: p.ip}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}},
		}
		if err := k8s.Status().Update(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
}

func httpToggleSpec() perfv1.ToggleSpec {
	return perfv1.ToggleSpec{HTTP: &perfv1.HTTPToggle{
		HTTPRequest: perfv1.HTTPRequest{Path: "/admin/profiling", Body: "on"},
		Port:        adminPort,
		Timeout:     "10s",
		Revert:      perfv1.HTTPRequest{Path: "/admin/profiling", Body: "off"},
	}}
}

// assertNothingApplied checks the status of a finished run says the toggle is
// off everywhere.
func assertNothingApplied(t *testing.T, exp *perfv1.PerfExperiment) {
	t.Helper()
	if tg := exp.Status.Toggle; tg == nil || tg.Applied || len(tg.Pods) != 0 {
		t.Errorf("status.toggle of a finished run: %+v", tg)
	}
	if c := meta.FindStatusCondition(exp.Status.Conditions, perfv1.ConditionToggleApplied); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("ToggleApplied of a finished run: %+v", c)
	}
}

// quiet waits a little and checks no further admin request arrives: a late
// reconcile must not toggle a finished run's pods again.
func quiet(t *testing.T, admin *adminServer, want map[string][]string) {
	t.Helper()
	time.Sleep(500 * time.Millisecond)
	for ip, w := range want {
		if got := admin.bodies(ip); !reflect.DeepEqual(got, w) {
			t.Errorf("pod %s got %q after the run ended; want %q", ip, got, w)
		}
	}
}

func TestHTTPToggleFullRun(t *testing.T) {
	d, admin := newHTTPDriver(t, "")
	dep := d.c.target("app")
	targetPods(t, d.c.ns, dep)
	before := templateJSON(t, d.c.ns, "app")
	gen := dep.Generation
	e := shortExperiment(d.c.ns, "app", httpToggleSpec())
	e.Spec.Windows.Settle = "0s" // a runtime toggle needs no warm-up
	if err := k8s.Create(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	exp := d.until("Succeeded", terminal)
	if exp.Status.Phase != perfv1.PhaseSucceeded {
		t.Fatalf("phase %s: %+v", exp.Status.Phase, exp.Status.Abort)
	}
	d.assertRestored(before, "app")
	assertWindows(t, exp, 3)
	assertNothingApplied(t, exp)

	want := []string{"on", "off", "on", "off", "on", "off"}
	for _, p := range fakePods {
		if got := admin.bodies(p.ip); !reflect.DeepEqual(got, want) {
			t.Errorf("pod %s got %q; want %q", p.name, got, want)
		}
		for _, c := range admin.callsOf(p.ip) {
			if c.method != http.MethodPost || c.path != "/admin/profiling" {
				t.Errorf("pod %s got %s %s; want POST /admin/profiling", p.name, c.method, c.path)
			}
		}
	}
	admin.assertOnlyFakePods(2 * len(want))
	assertOnDuringTreatment(t, exp, admin)

	// Runtime toggles never touch the template: only the lock and its release
	// moved the generation.
	if after := templateJSON(t, d.c.ns, "app"); after != before {
		t.Fatalf("template changed:\nbefore %s\nafter  %s", before, after)
	}
	dep = &appsv1.Deployment{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: d.c.ns, Name: "app"}, dep); err != nil {
		t.Fatal(err)
	}
	if dep.Generation != gen+2 {
		t.Errorf("target generation went %d → %d; want the lock's 2 only", gen, dep.Generation)
	}
	if len(d.c.dupes) > 0 {
		t.Errorf("Jobs created twice: %v", d.c.dupes)
	}
	quiet(t, admin, map[string][]string{fakePods[0].ip: want, fakePods[1].ip: want})
}

// assertOnDuringTreatment checks, on the fake clock, that each stage's "on"
// came after its baseline window and before its treatment window, and its "off"
// after the treatment window and before the next baseline.
func assertOnDuringTreatment(t *testing.T, exp *perfv1.PerfExperiment, admin *adminServer) {
	t.Helper()
	type span struct{ start, end time.Time }
	var baseline, treatment []span
	for _, w := range exp.Status.Windows {
		if w.Start == nil || w.End == nil {
			continue
		}
		s := span{w.Start.Time, w.End.Time}
		switch w.Variant {
		case perfv1.VariantBaseline:
			baseline = append(baseline, s)
		case perfv1.VariantTreatment:
			treatment = append(treatment, s)
		}
	}
	if len(baseline) != 3 || len(treatment) != 3 {
		t.Fatalf("%d baseline and %d treatment windows", len(baseline), len(treatment))
	}
	for _, p := range fakePods {
		calls := admin.callsOf(p.ip)
		if len(calls) != 6 {
			continue // reported by the caller
		}
		for s := 0; s < 3; s++ {
			on, off := calls[2*s].at, calls[2*s+1].at
			if on.Before(baseline[s].end) || on.After(treatment[s].start) {
				t.Errorf("pod %s stage %d: on at %s, outside baseline end %s .. treatment start %s",
					p.name, s, on, baseline[s].end, treatment[s].start)
			}
			if off.Before(treatment[s].end) || (s < 2 && off.After(baseline[s+1].start)) {
				t.Errorf("pod %s stage %d: off at %s, before treatment end %s or after the next baseline",
					p.name, s, off, treatment[s].end)
			}
		}
	}
}

func TestHTTPToggleRefusedAbortsAndRevertsTheOthers(t *testing.T) {
	ok, bad := fakePods[0], fakePods[1]
	d, admin := newHTTPDriver(t, fakeAddr(bad.ip))
	dep := d.c.target("app")
	targetPods(t, d.c.ns, dep)
	before := templateJSON(t, d.c.ns, "app")
	e := shortExperiment(d.c.ns, "app", httpToggleSpec())
	e.Spec.Windows.Settle = "0s"
	if err := k8s.Create(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	exp := d.until("Aborted", terminal)
	if exp.Status.Phase != perfv1.PhaseAborted || exp.Status.Abort == nil || exp.Status.Abort.Reason != perfv1.ReasonToggleFailed {
		t.Fatalf("phase %s abort %+v", exp.Status.Phase, exp.Status.Abort)
	}
	for _, w := range []string{"pod " + bad.name, "500", "profiler unavailable"} {
		if !strings.Contains(exp.Status.Abort.Message, w) {
			t.Errorf("abort message %q does not mention %q", exp.Status.Abort.Message, w)
		}
	}
	if strings.Contains(exp.Status.Abort.Message, "pod "+ok.name) {
		t.Errorf("abort message %q blames the pod that accepted", exp.Status.Abort.Message)
	}
	if !meta.IsStatusConditionTrue(exp.Status.Conditions, perfv1.ConditionStalled) {
		t.Errorf("an aborted run must read as Stalled: %+v", exp.Status.Conditions)
	}
	d.assertRestored(before, "app") // lock and original-state record gone, Jobs gone
	dep = &appsv1.Deployment{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: d.c.ns, Name: "app"}, dep); err != nil {
		t.Fatal(err)
	}
	if _, held := dep.Annotations[perfv1.AnnotationLock]; held {
		t.Errorf("lock not released: %v", dep.Annotations)
	}
	assertNothingApplied(t, exp)
	for _, w := range exp.Status.Windows {
		if w.Variant == perfv1.VariantTreatment && w.Load != nil {
			t.Errorf("a treatment window was measured: %+v", w)
		}
	}

	// The pod that accepted was switched back at once; the one that refused was
	// never on, so it gets no revert.
	want := map[string][]string{ok.ip: {"on", "off"}, bad.ip: {"on"}}
	for ip, w := range want {
		if got := admin.bodies(ip); !reflect.DeepEqual(got, w) {
			t.Errorf("pod %s got %q; want %q", ip, got, w)
		}
	}
	admin.assertOnlyFakePods(3)
	quiet(t, admin, want)
}
