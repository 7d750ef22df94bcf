package controllers_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
	"perfexp.dev/perf-operator/internal/k6"
)

// fakeK6API stands in for the REST API of every k6 pod: each pod (told apart
// by its IP) serves 100 requests a second of fake time from its first read on,
// and, once failFrom is set, half of those after it fail.
type fakeK6API struct {
	*httptest.Server
	clock    *clocktesting.FakeClock
	mu       sync.Mutex
	first    map[string]time.Time
	failFrom time.Time
	hosts    []string
}

func newFakeK6API(t *testing.T, clock *clocktesting.FakeClock) *fakeK6API {
	f := &fakeK6API{clock: clock, first: map[string]time.Time{}}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeK6API) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/metrics" {
		http.NotFound(w, r)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.clock.Now()
	f.hosts = append(f.hosts, r.Host)
	if _, ok := f.first[r.Host]; !ok {
		f.first[r.Host] = now
	}
	reqs := int64(100 * now.Sub(f.first[r.Host]).Seconds())
	var failed int64
	if !f.failFrom.IsZero() && now.After(f.failFrom) {
		failed = int64(50 * now.Sub(f.failFrom).Seconds())
	}
	rate := 0.0
	if reqs > 0 {
		rate = float64(failed) / float64(reqs)
	}
	// k6 v1's shape: the failure metric carries only its rate.
	fmt.Fprintf(w, `{"data":[{"type":"metrics","id":"http_reqs","attributes":{"type":"counter","contains":"default","tainted":null,"sample":{"count":%d,"rate":100}}},`+
		`{"type":"metrics","id":"http_req_failed","attributes":{"type":"rate","contains":"default","tainted":null,"sample":{"rate":%g}}}]}`, reqs, rate)
}

func (f *fakeK6API) startFailing() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failFrom = f.clock.Now()
	return f.failFrom
}

// client dials the fake for every pod address, as if each pod served it.
func (f *fakeK6API) client() k6.LiveClient {
	real := f.Listener.Addr().String()
	return k6.LiveClient{Client: &http.Client{Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if !strings.HasPrefix(addr, "10.2.") || !strings.HasSuffix(addr, ":6565") {
				return nil, fmt.Errorf("not a fake k6 pod: %s", addr)
			}
			var d net.Dialer
			return d.DialContext(ctx, network, real)
		},
	}}}
}

var k6PodIPs atomic.Int64

// giveK6PodsIPs plays the kubelet's part the test cluster leaves out: running
// k6 pods get an IP.
func giveK6PodsIPs(t *testing.T, c *cluster) {
	t.Helper()
	var pods corev1.PodList
	if err := k8s.List(context.Background(), &pods, client.InNamespace(c.ns), client.HasLabels{batchv1.JobNameLabel}); err != nil {
		t.Fatal(err)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Status.PodIP != "" || p.Status.Phase != corev1.PodRunning {
			continue
		}
		n := k6PodIPs.Add(1)
		p.Status.PodIP = fmt.Sprintf("10.2.%d.%d", n/250, n%250+1)
		if err := k8s.Status().Update(context.Background(), p); err != nil {
			t.Fatal(err)
		}
	}
}

// An error-rate breach in the middle of a treatment window, seen only in k6's
// live counters (the Job's final result would come minutes later), aborts the
// run with ErrorRate within two sampling intervals, and reverts the toggle.
func TestLiveErrorRateAbortsMidWindow(t *testing.T) {
	clock := newTestClock()
	d := &driver{t: t, c: newCluster(t, clock), clock: clock, name: "overhead", step: 15 * time.Second}
	d.c.target("app")
	before := templateJSON(t, d.c.ns, "app")
	api := newFakeK6API(t, clock)
	d.op = startOperatorWith(t, clock, metricsFor(clock), api.client())
	e := shortExperiment(d.c.ns, "app", envToggle())
	e.Spec.Stages = []perfv1.StageSpec{{QPS: 100}}
	e.Spec.Windows = perfv1.WindowsSpec{Baseline: "3m", Treatment: "10m", Settle: "10s"}
	e.Spec.Metrics.Interval = "15s"
	e.Spec.Guardrails.ErrorRate = "5%"
	if err := k8s.Create(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	var failFrom time.Time
	exp := d.until("Aborted", func(e *perfv1.PerfExperiment) bool {
		giveK6PodsIPs(t, d.c)
		if n := len(e.Status.Windows); failFrom.IsZero() && e.Status.Phase == perfv1.PhaseTreatment && n > 0 {
			// Two minutes into the window, far from its end: the target starts failing.
			if w := e.Status.Windows[n-1]; w.Start != nil && !clock.Now().Before(w.Start.Add(2*time.Minute)) {
				failFrom = api.startFailing()
			}
		}
		return terminal(e)
	})
	st := exp.Status
	if failFrom.IsZero() {
		t.Fatalf("the run ended (%s) before the target failed", st.Phase)
	}
	if st.Phase != perfv1.PhaseAborted || st.Abort == nil || st.Abort.Reason != perfv1.ReasonErrorRate ||
		!strings.Contains(st.Abort.Message, "live from load Job") || !strings.Contains(st.Abort.Message, "in the treatment window of stage 100, limit 5%") {
		t.Fatalf("phase %s, abort %+v", st.Phase, st.Abort)
	}
	took := st.Abort.At.Sub(failFrom)
	t.Logf("aborted %s after the target started failing: %s", took, st.Abort.Message)
	if took <= 0 || took > 2*15*time.Second {
		t.Fatalf("aborted %s after the failures began; want within two 15s intervals", took)
	}
	treatment := st.Windows[len(st.Windows)-1]
	if treatment.Variant != perfv1.VariantTreatment || treatment.Load != nil || !st.Abort.At.Time.Before(treatment.Start.Add(10*time.Minute)) {
		t.Fatalf("the treatment window's Job had ended: %+v", treatment)
	}
	d.assertRestored(before, "app")
	api.mu.Lock()
	defer api.mu.Unlock()
	if len(api.hosts) == 0 {
		t.Fatal("the operator never read a k6 pod's API")
	}
}
