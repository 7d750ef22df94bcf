package metrics

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"

	"perfexp.dev/perf-operator/internal/testenv"
)

// This file runs a real Prometheus server (Debian's package, installed by
// hack/prometheus.sh when it is missing) on backfilled, synthetic cAdvisor,
// JVM and Go series, shared by every test that calls realPrometheus.

// step is the synthetic scrape interval.
const step = 15 * time.Second

// series is one synthetic time series: its labels in order and its value at
// second s since the data's start.
type series struct {
	family, typ string // OpenMetrics family and type (counter families lose _total)
	name        string
	labels      [][2]string
	value       func(s float64) float64
}

// Synthetic target: namespace shop, container app, pods api-1 (JVM, Prometheus
// names), api-10 (Go; a name api-1's regex must not match without anchoring)
// and api-2 (JVM, OpenTelemetry names).
const (
	nsShop = "shop"
	ctrApp = "app"
)

var (
	cpuRate = map[string]float64{"api-1": 0.25, "api-10": 1.5, "api-2": 0.5}
	// The hostile target: every name tries to break out of its string and regex.
	evilNS  = "evil\"ns\\'`"
	evilPod = "p.*|\"x\\(\n"
	evilCtr = "c\"}[5m]) or vector(1) #"
)

func wsOf(pod string, s float64) float64 {
	switch pod {
	case "api-1":
		return 300<<20 + 1000*s
	case "api-10":
		return 50 << 20
	default:
		return 400<<20 + 10*s
	}
}

func cadv(ns, pod, ctr string) [][2]string {
	return [][2]string{{"namespace", ns}, {"pod", pod}, {"container", ctr}, {"job", "kubelet"}, {"metrics_path", "/metrics/cadvisor"}}
}

func app(ns, pod, ctr string, extra ...[2]string) [][2]string {
	return append(append([][2]string{}, extra...), [2]string{"namespace", ns}, [2]string{"pod", pod}, [2]string{"container", ctr}, [2]string{"job", "app"})
}

func cpuSeries(l [][2]string, rate float64) series {
	return series{"container_cpu_usage_seconds", "counter", "container_cpu_usage_seconds_total", l, func(s float64) float64 { return 1000 + rate*s }}
}

// gcSum is a summary's or histogram's _sum of GC time, rising at rate
// seconds per second (written untyped, as a lone _sum).
func gcSum(name string, l [][2]string, rate float64) series {
	return series{name, "unknown", name, l, func(s float64) float64 { return 3 + rate*s }}
}

// gcRate is each pod's time in GC that the default GC query must find.
var gcRate = map[string]float64{"api-1": 0.012, "api-10": 0.001, "api-2": 0.030}

func gauge(name string, l [][2]string, f func(float64) float64) series {
	return series{name, "gauge", name, l, f}
}

func constant(v float64) func(float64) float64 { return func(float64) float64 { return v } }

// syntheticSeries are the backfilled series: the target's and decoys that a
// wrong selector would pick up (other namespace, other container, pod-level
// cgroup, pause container, a pod whose name a dot would match).
func syntheticSeries() []series {
	var out []series
	for _, pod := range []string{"api-1", "api-10", "api-2"} {
		pod := pod
		out = append(out,
			cpuSeries(cadv(nsShop, pod, ctrApp), cpuRate[pod]),
			cpuSeries(cadv(nsShop, pod, "istio-proxy"), 0.1),
			cpuSeries(cadv(nsShop, pod, ""), cpuRate[pod]+0.1),
			cpuSeries(cadv(nsShop, pod, "POD"), 0.001),
			cpuSeries(cadv("other", pod, ctrApp), 7),
			gauge("container_memory_working_set_bytes", cadv(nsShop, pod, ctrApp), func(s float64) float64 { return wsOf(pod, s) }),
			gauge("container_memory_working_set_bytes", cadv(nsShop, pod, "istio-proxy"), constant(30<<20)),
			gauge("container_memory_working_set_bytes", cadv(nsShop, pod, ""), func(s float64) float64 { return wsOf(pod, s) + 30<<20 }),
			gauge("container_memory_working_set_bytes", cadv("other", pod, ctrApp), constant(1<<30)),
		)
	}
	heap := func(l [][2]string, f func(float64) float64) series { return gauge("jvm_memory_used_bytes", l, f) }
	out = append(out,
		// api-1: Prometheus client_java / Micrometer names, heap split in pools.
		heap(app(nsShop, "api-1", ctrApp, [2]string{"area", "heap"}, [2]string{"id", "G1 Eden Space"}), func(s float64) float64 { return 100<<20 + 100*s }),
		heap(app(nsShop, "api-1", ctrApp, [2]string{"area", "heap"}, [2]string{"id", "G1 Old Gen"}), constant(200<<20)),
		heap(app(nsShop, "api-1", ctrApp, [2]string{"area", "nonheap"}, [2]string{"id", "Metaspace"}), constant(64<<20)),
		// api-2: OpenTelemetry semantic-convention names.
		heap(app(nsShop, "api-2", ctrApp, [2]string{"jvm_memory_type", "heap"}, [2]string{"jvm_memory_pool_name", "G1 Eden Space"}), constant(10<<20)),
		heap(app(nsShop, "api-2", ctrApp, [2]string{"jvm_memory_type", "heap"}, [2]string{"jvm_memory_pool_name", "G1 Old Gen"}), constant(20<<20)),
		heap(app(nsShop, "api-2", ctrApp, [2]string{"jvm_memory_type", "non_heap"}, [2]string{"jvm_memory_pool_name", "Metaspace"}), constant(40<<20)),
		// api-10: Go runtime.
		gauge("go_memstats_heap_alloc_bytes", app(nsShop, "api-10", ctrApp), func(s float64) float64 { return 20<<20 + 10*s }),
		// Time in GC: client_java's collectors on api-1 (with a Micrometer
		// timer beside it that the default's order must not prefer), the
		// OpenTelemetry histogram's sum on api-2, the Go runtime's pauses on
		// api-10. Counters in seconds, rising at the rates in gcRate.
		gcSum("jvm_gc_collection_seconds_sum", app(nsShop, "api-1", ctrApp, [2]string{"gc", "G1 Young Generation"}), 0.010),
		gcSum("jvm_gc_collection_seconds_sum", app(nsShop, "api-1", ctrApp, [2]string{"gc", "G1 Old Generation"}), 0.002),
		gcSum("jvm_gc_pause_seconds_sum", app(nsShop, "api-1", ctrApp, [2]string{"action", "end of minor GC"}), 0.5),
		gcSum("jvm_gc_duration_seconds_sum", app(nsShop, "api-2", ctrApp, [2]string{"jvm_gc_name", "G1 Young Generation"}), 0.030),
		gcSum("go_gc_duration_seconds_sum", app(nsShop, "api-10", ctrApp), 0.001),
		// A metric with other label names, for the user-query test.
		gauge("app_heap_bytes", [][2]string{{"kubernetes_namespace", nsShop}, {"kubernetes_pod", "api-1"}}, constant(123456789)),
		// The hostile target and the decoys its names would match unescaped.
		cpuSeries(cadv(evilNS, evilPod, evilCtr), 0.75),
		cpuSeries(cadv(evilNS, "pXXX", evilCtr), 5),
		gauge("container_memory_working_set_bytes", cadv(evilNS, evilPod, evilCtr), constant(777)),
		gauge("container_memory_working_set_bytes", cadv(evilNS, "pXXX", evilCtr), constant(999)),
		// web.1 and webx1: a pod name with a dot must match only itself.
		gauge("container_memory_working_set_bytes", cadv(nsShop, "web.1", ctrApp), constant(1)),
		gauge("container_memory_working_set_bytes", cadv(nsShop, "webx1", ctrApp), constant(2)),
	)
	return out
}

// openMetrics writes the series from start to end (inclusive) every step,
// grouped by family as OpenMetrics requires.
func openMetrics(all []series, start, end time.Time) []byte {
	var b bytes.Buffer
	done := map[string]bool{}
	for _, s := range all {
		if done[s.family] {
			continue
		}
		done[s.family] = true
		fmt.Fprintf(&b, "# TYPE %s %s\n", s.family, s.typ)
		for _, x := range all {
			if x.family != s.family {
				continue
			}
			var l []string
			for _, kv := range x.labels {
				l = append(l, kv[0]+`="`+omEscape(kv[1])+`"`)
			}
			for t := start; !t.After(end); t = t.Add(step) {
				sec := t.Sub(start).Seconds()
				fmt.Fprintf(&b, "%s{%s} %s %d\n", x.name, strings.Join(l, ","), strconv.FormatFloat(x.value(sec), 'g', -1, 64), t.Unix())
			}
		}
	}
	b.WriteString("# EOF\n")
	return b.Bytes()
}

// omEscape escapes an OpenMetrics label value.
func omEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}

// promServer is the shared real Prometheus.
type promServer struct {
	url        string
	api        promv1.API
	start, end time.Time // the data's first and last sample
	dir        string
	cmd        *exec.Cmd
	exited     chan struct{}
	logPath    string
}

// logTail returns the end of the server's output.
func (s *promServer) logTail() string {
	b, _ := os.ReadFile(s.logPath)
	return tail(string(b), 4000)
}

var (
	promOnce   sync.Once
	promShared *promServer
	promErr    error
)

// realPrometheus returns the shared server, starting it on first use. A
// missing or broken Prometheus fails the test: it is never skipped.
func realPrometheus(t *testing.T) *promServer {
	t.Helper()
	promOnce.Do(func() { promShared, promErr = startPrometheus(t) })
	if promErr != nil {
		t.Fatalf("real Prometheus: %v", promErr)
	}
	return promShared
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

func startPrometheus(t *testing.T) (_ *promServer, err error) {
	began := time.Now()
	prom, tool, err := testenv.PrometheusBinaries(t.Logf)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "perf-operator-prometheus-")
	if err != nil {
		return nil, err
	}
	s := &promServer{dir: dir, logPath: filepath.Join(dir, "prometheus.log")}
	defer func() {
		if err != nil {
			s.stop()
		}
	}()
	// Two hours of data ending five minutes ago, on 15s boundaries. The server
	// scrapes nothing, so its head block stays empty and cannot overlap them.
	s.end = time.Now().Add(-5 * time.Minute).Truncate(step)
	s.start = s.end.Add(-2 * time.Hour)
	input := filepath.Join(dir, "input.om")
	if err := os.WriteFile(input, openMetrics(syntheticSeries(), s.start, s.end), 0o600); err != nil {
		return nil, err
	}
	tsdb := filepath.Join(dir, "tsdb")
	if out, err := exec.Command(tool, "tsdb", "create-blocks-from", "openmetrics", "--quiet", input, tsdb).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("promtool tsdb create-blocks-from openmetrics: %v: %s", err, out)
	}
	config := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(config, []byte("global:\n  scrape_interval: 15s\nscrape_configs: []\n"), 0o600); err != nil {
		return nil, err
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	s.cmd = exec.Command(prom,
		"--config.file="+config,
		"--storage.tsdb.path="+tsdb,
		"--storage.tsdb.retention.time=10y",
		"--web.listen-address="+addr,
	)
	logFile, err := os.Create(s.logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the child has its own descriptor
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	killWithParent(s.cmd)
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", prom, err)
	}
	s.exited = make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(s.exited) }()
	s.url = "http://" + addr
	if err := s.waitReady(30 * time.Second); err != nil {
		return nil, err
	}
	if s.api, err = NewPrometheusAPI(s.url); err != nil {
		return nil, err
	}
	t.Logf("real Prometheus %s ready at %s in %s (data %s to %s)", prom, s.url, time.Since(began).Round(time.Millisecond), s.start.Format(time.TimeOnly), s.end.Format(time.TimeOnly))
	return s, nil
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// waitReady polls /-/ready until it answers 200, the process exits or the
// deadline passes.
func (s *promServer) waitReady(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	client := &http.Client{Timeout: time.Second}
	for {
		resp, err := client.Get(s.url + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-s.exited:
			return fmt.Errorf("prometheus exited before it was ready: %s", s.logTail())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("prometheus not ready at %s after %s: %s", s.url, limit, s.logTail())
		}
	}
}

// stop terminates the server (SIGTERM, then SIGKILL after 10s) and removes its
// directory.
func (s *promServer) stop() {
	if s.exited != nil {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.exited:
		case <-time.After(10 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.exited
		}
	}
	_ = os.RemoveAll(s.dir)
}

func TestMain(m *testing.M) {
	code := m.Run()
	if promShared != nil {
		promShared.stop()
	}
	os.Exit(code)
}
