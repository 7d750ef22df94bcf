package k6

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
)

func TestParseLive(t *testing.T) {
	// What k6 v1.8.1 answers (abridged): http_req_failed carries only its rate.
	const k6v1 = `{"data":[
	 {"type":"metrics","id":"http_req_duration","attributes":{"type":"trend","contains":"time","tainted":null,"sample":{"avg":1.4,"max":4.9,"med":0.7,"min":0.4,"p(90)":3.0,"p(95)":3.8}}},
	 {"type":"metrics","id":"vus","attributes":{"type":"gauge","contains":"default","tainted":null,"sample":{"value":5}}},
	 {"type":"metrics","id":"http_req_failed","attributes":{"type":"rate","contains":"default","tainted":null,"sample":{"rate":0.21052631578947367}}},
	 {"type":"metrics","id":"http_reqs","attributes":{"type":"counter","contains":"default","tainted":null,"sample":{"count":57,"rate":19.45}}}]}`
	for _, tc := range []struct {
		name, body string
		want       Live
		err        string
	}{
		{"k6 v1: failures from the rate", k6v1, Live{Requests: 57, Failed: 12}, ""},
		{"passes when given", `{"data":[{"id":"http_reqs","attributes":{"sample":{"count":100}}},
		  {"id":"http_req_failed","attributes":{"sample":{"rate":0.07,"passes":7,"fails":93}}},
		  {"id":"dropped_iterations","attributes":{"sample":{"count":3,"rate":0.1}}}]}`, Live{Requests: 100, Failed: 7, Dropped: 3}, ""},
		{"no failures metric yet", `{"data":[{"id":"http_reqs","attributes":{"sample":{"count":5}}}]}`, Live{Requests: 5}, ""},
		{"no requests yet", `{"data":[{"id":"vus","attributes":{"sample":{"value":1}}}]}`, Live{}, "no http_reqs metric yet"},
		{"a rate beyond 1", `{"data":[{"id":"http_reqs","attributes":{"sample":{"count":5}}},{"id":"http_req_failed","attributes":{"sample":{"rate":3}}}]}`, Live{}, "not between 0 and 1"},
		{"a negative count", `{"data":[{"id":"http_reqs","attributes":{"sample":{"count":-5}}}]}`, Live{}, `no usable "count"`},
		{"not JSON", `404 page not found`, Live{}, "not a /v1/metrics answer"},
		{"latency buckets", `{"data":[{"id":"http_reqs","attributes":{"sample":{"count":9}}},
		  {"id":"perf_latency_g0","attributes":{"sample":{"count":9}}},
		  {"id":"perf_latency_g0{b:3}","attributes":{"sample":{"count":4,"rate":1}}},
		  {"id":"perf_latency_g2{b:31}","attributes":{"sample":{"count":5,"rate":1}}}]}`, Live{Requests: 9, Buckets: map[int]int64{3: 4, 95: 5}}, ""},
		{"a bucket beyond the group", `{"data":[{"id":"http_reqs","attributes":{"sample":{"count":9}}},
		  {"id":"perf_latency_g0{b:32}","attributes":{"sample":{"count":4}}}]}`, Live{}, "not a latency bucket"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseLive([]byte(tc.body))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// A k6 API that errs or hangs gives an error, and a hang is cut off by
// LiveTimeout: a sample never holds the reconcile.
func TestReadLiveErrorsAndHangs(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/broken/v1/metrics", "/v1/metrics":
			if r.Host == "hang" {
				select {
				case <-release:
				case <-r.Context().Done():
				}
				return
			}
			http.Error(w, "boom", http.StatusInternalServerError)
		}
	}))
	defer srv.Close()
	defer close(release)
	real := srv.Listener.Addr().String()
	c := LiveClient{Client: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, real)
		},
	}}}
	if _, err := c.Read(context.Background(), "10.0.0.7:6565"); err == nil || err.Error() != "k6 API at 10.0.0.7:6565: HTTP 500 Internal Server Error" {
		t.Fatalf("HTTP 500: %v", err)
	}
	req := func(host string) error {
		_, err := c.Read(context.Background(), host)
		return err
	}
	if err := req("hang"); err == nil || err.Error() != "k6 API at hang: no answer within 2s" {
		t.Fatalf("hang: %v", err)
	}
	if _, err := (LiveClient{}).Read(context.Background(), "127.0.0.1:1"); err == nil || !strings.Contains(err.Error(), "k6 API at 127.0.0.1:1") {
		t.Fatalf("refused: %v", err)
	}
}

// TestRealK6LiveCounters runs the Job's k6 command with its REST API on a
// loopback port and reads the live counters while the window runs: they count
// the requests the target served, and the failures once the target fails.
func TestRealK6LiveCounters(t *testing.T) {
	bin := k6Binary(t)
	var served, failedServed atomic.Int64
	var failing atomic.Bool
	tg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if failing.Load() {
			failedServed.Add(1)
			http.Error(w, "down", http.StatusServiceUnavailable)
		} else {
			served.Add(1)
		}
	}))
	defer tg.Close()
	exp := testExperiment()
	exp.Spec.Target.URL = tg.URL
	exp.Spec.Load.Requests = []perfv1.RequestSpec{{Method: "GET", Path: "/", Weight: 1}}
	w := Window{Stage: 0, Variant: perfv1.VariantTreatment, QPS: 100, Duration: 8 * time.Second}
	dir := t.TempDir()
	cm, err := ScriptConfigMap(exp)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "scripts", ScriptKey), cm.Data[ScriptKey])
	job, err := BuildJob(exp, w, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := job.Spec.Template.Spec.Containers[0]
	if p := c.Ports; len(p) != 1 || p[0].ContainerPort != APIPort || p[0].Name != APIPortName {
		t.Fatalf("k6 container ports %+v", p)
	}
	addr := freeLoopbackAddr(t)
	args := append([]string{}, c.Command[1:len(c.Command)-1]...)
	args = withAPIAddress(t, append(args, filepath.Join(dir, "scripts", ScriptKey)), addr)

	done := make(chan *PodResult, 1)
	go func() { done <- runPod(t, bin, args, dir, 0, c.Env, nil) }()

	client := LiveClient{}
	// poll reads until cond holds; the k6 run bounds the loop (it ends after
	// its window and the test fails if cond never held by then).
	poll := func(what string, cond func(Live) bool) Live {
		t.Helper()
		for i := 0; i < 200; i++ {
			l, err := client.Read(context.Background(), addr)
			if err == nil && cond(l) {
				return l
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("live counters never showed %s", what)
		return Live{}
	}
	healthy := poll("requests", func(l Live) bool { return l.Requests >= 100 })
	if healthy.Failed != 0 || healthy.Dropped != 0 || healthy.Requests > served.Load() {
		t.Errorf("healthy target: live %+v, target served %d", healthy, served.Load())
	}
	failing.Store(true)
	broken := poll("failures", func(l Live) bool { return l.Failed >= 50 })
	if broken.Requests <= healthy.Requests || broken.Failed > failedServed.Load() || broken.Requests-broken.Failed < healthy.Requests {
		t.Errorf("failing target: live %+v after %+v; target served %d and failed %d", broken, healthy, served.Load(), failedServed.Load())
	}
	t.Logf("live: %d requests, %d failed, then %d, %d", healthy.Requests, healthy.Failed, broken.Requests, broken.Failed)
	// The live histogram counts the requests k6 counted, and two readings'
	// difference is the histogram of the requests between them.
	sum := func(b map[int]int64) (n int64) {
		for _, c := range b {
			n += c
		}
		return n
	}
	if n := sum(broken.Buckets); n < broken.Requests*9/10 || n > broken.Requests {
		t.Errorf("live histogram counts %d of %d requests", n, broken.Requests)
	}
	h, err := LiveHistogram(healthy.Buckets, broken.Buckets)
	if err != nil || h.Total() != sum(broken.Buckets)-sum(healthy.Buckets) || h.Quantile(0.5) <= 0 {
		t.Errorf("histogram between the readings: %+v, %v", h, err)
	}
	r := <-done
	if r == nil {
		return
	}
	if r.Requests < broken.Requests || r.Failures < broken.Failed || r.Requests != served.Load()+failedServed.Load() || r.Failures != failedServed.Load() {
		t.Errorf("final result %d requests, %d failed; live %+v; target %d + %d", r.Requests, r.Failures, broken, served.Load(), failedServed.Load())
	}
}

// freeLoopbackAddr is a loopback address with a port free right now.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func TestLiveHistogramAndBucketCodec(t *testing.T) {
	from := map[int]int64{3: 4, 10: 1}
	to := map[int]int64{3: 6, 10: 1, 12: 3}
	h, err := LiveHistogram(from, to)
	if err != nil || !reflect.DeepEqual(h.Buckets, []Bucket{{3, 2}, {12, 3}}) {
		t.Fatalf("LiveHistogram %+v, %v", h.Buckets, err)
	}
	if _, err := LiveHistogram(to, from); err == nil || !strings.Contains(err.Error(), "went back") {
		t.Errorf("a counter going back: %v", err)
	}
	enc := EncodeBuckets(to)
	if enc != "3:6 10:1 12:3" {
		t.Errorf("EncodeBuckets %q", enc)
	}
	if got, err := DecodeBuckets(enc); err != nil || !reflect.DeepEqual(got, to) {
		t.Errorf("DecodeBuckets %v, %v", got, err)
	}
	if _, err := DecodeBuckets("3:x"); err == nil {
		t.Error("a bad pair decoded")
	}
	tmpl, err := os.ReadFile("run.js.tmpl")
	if err != nil || !strings.Contains(string(tmpl), fmt.Sprintf("const GROUP = %d;", histogramGroup)) {
		t.Errorf("run.js's GROUP is not histogramGroup (%d): %v", histogramGroup, err)
	}
}
