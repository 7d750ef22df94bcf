package main

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"golang.org/x/sys/unix"
)

// Switch names as they appear in admin paths and the toy_switch_enabled label.
const (
	swProfiling      = "profiling"
	swMemoryTracking = "memory-tracking"
	swBuffers        = "buffers"
)

var switchNames = []string{swProfiling, swMemoryTracking, swBuffers}

// pageSize is the stride at which retained memory is written so it is resident.
const pageSize = 4096

// app is the toy service: its settings, its switches and what they hold.
type app struct {
	cfg config
	log *slog.Logger

	mu        sync.Mutex
	profiling bool
	tracking  bool
	buffers   bool
	tracked   [][]byte // memory tracking's leak: one chunk per request while on
	trackedN  int64
	buffer    []byte // the buffers switch's resident block

	reg       *prometheus.Registry
	switches  *prometheus.GaugeVec
	switchReq *prometheus.CounterVec
	retained  *prometheus.GaugeVec
	requests  *prometheus.CounterVec
	durations prometheus.Histogram
	cpuSpent  prometheus.Counter
	// switchCPU is the CPU the profiling switch added to the requests' burn.
	// The ground truth of the overhead a PerfExperiment measures on the pod is
	// the process's CPU per work request while profiling is on over the same
	// while it is off: stateCPU and stateReqs (guarded by mu) keep both, the
	// CPU accrued up to since plus what the process spent after it.
	switchCPU prometheus.Counter
	stateCPU  [2]time.Duration // by profiling off (0) and on (1)
	stateReqs [2]float64
	since     time.Duration // process CPU at the last profiling switch
}

func boolIndex(b bool) int {
	if b {
		return 1
	}
	return 0
}

// processCPU is the process's user+system CPU time so far.
func processCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// profilingCPU is the process CPU spent with profiling in state on (1) or off
// (0), up to now.
func (a *app) profilingCPU(on int) float64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	d := a.stateCPU[on]
	if a.profiling == (on == 1) {
		d += processCPU() - a.since
	}
	return d.Seconds()
}

// profilingRequests is the work requests served with profiling on (1) or off (0).
func (a *app) profilingRequests(on int) float64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.stateReqs[on]
}

func newApp(cfg config, log *slog.Logger) *app {
	a := &app{cfg: cfg, log: log, reg: prometheus.NewRegistry(), since: processCPU()}
	a.switches = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "toy_switch_enabled", Help: "1 while the switch is on.",
	}, []string{"switch"})
	a.switchReq = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "toy_switch_requests_total", Help: "Admin requests that set a switch, by switch and the state asked for, whether or not it changed anything.",
	}, []string{"switch", "to"})
	a.retained = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "toy_retained_bytes", Help: "Bytes held by a switch (memory-tracking's leak, buffers' block).",
	}, []string{"switch"})
	a.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "toy_requests_total", Help: "Work requests served, by status code.",
	}, []string{"code"})
	a.durations = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "toy_request_duration_seconds",
		Help:    "Wall time of work requests.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14), // 0.5ms .. ~4s
	})
	a.cpuSpent = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "toy_work_cpu_seconds_total", Help: "CPU time burnt by work requests (thread CPU clock).",
	})
	a.switchCPU = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "toy_profiling_cpu_seconds_total", Help: "CPU time the profiling switch added to work requests (thread CPU clock): the ground truth of its overhead.",
	})
	a.reg.MustRegister(
		collectors.NewGoCollector(), // go_memstats_heap_alloc_bytes, go_memstats_heap_inuse_bytes, ...
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		a.switches, a.switchReq, a.retained, a.requests, a.durations, a.cpuSpent, a.switchCPU,
	)
	for i, state := range []string{"off", "on"} {
		a.reg.MustRegister(
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "toy_profiling_process_cpu_seconds_total", ConstLabels: prometheus.Labels{"profiling": state},
				Help: "The process's CPU time with profiling in this state. The switch's overhead on the pod is (cpu{on}/requests{on}) / (cpu{off}/requests{off}) − 1.",
			}, func() float64 { return a.profilingCPU(i) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "toy_profiling_requests_total", ConstLabels: prometheus.Labels{"profiling": state},
				Help: "Work requests served with profiling in this state.",
			}, func() float64 { return a.profilingRequests(i) }),
		)
	}
	for _, n := range switchNames {
		a.switches.WithLabelValues(n).Set(0)
	}
	a.retained.WithLabelValues(swMemoryTracking).Set(0)
	a.retained.WithLabelValues(swBuffers).Set(0)
	// The start-up state goes through set so it is logged and exported like a change.
	a.set(swProfiling, cfg.Profiling, "config")
	a.set(swMemoryTracking, cfg.MemoryTracking, "config")
	a.set(swBuffers, cfg.Buffers, "config")
	return a
}

// state reports a switch; ok is false for an unknown name.
func (a *app) state(name string) (on, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch name {
	case swProfiling:
		return a.profiling, true
	case swMemoryTracking:
		return a.tracking, true
	case swBuffers:
		return a.buffers, true
	}
	return false, false
}

// set changes a switch, logs one line when it changed, and returns whether it
// changed. Turning memory tracking or buffers off drops what they hold, so a
// revert recovers the heap at the next GC.
func (a *app) set(name string, on bool, source string) (changed bool, err error) {
	a.mu.Lock()
	var cur *bool
	switch name {
	case swProfiling:
		cur = &a.profiling
	case swMemoryTracking:
		cur = &a.tracking
	case swBuffers:
		cur = &a.buffers
	default:
		a.mu.Unlock()
		return false, fmt.Errorf("unknown switch %q: want one of %s", name, strings.Join(switchNames, ", "))
	}
	changed = *cur != on
	*cur = on
	if name == swProfiling && changed {
		now, was := processCPU(), 0
		if !on {
			was = 1
		}
		a.stateCPU[was] += now - a.since
		a.since = now
	}
	var released int64
	switch {
	case name == swMemoryTracking && !on:
		released = a.trackedN
		a.tracked, a.trackedN = nil, 0
		a.retained.WithLabelValues(swMemoryTracking).Set(0)
	case name == swBuffers && on && a.buffer == nil:
		a.buffer = residentBytes(a.cfg.BuffersSize)
		a.retained.WithLabelValues(swBuffers).Set(float64(len(a.buffer)))
	case name == swBuffers && !on:
		released = int64(len(a.buffer))
		a.buffer = nil
		a.retained.WithLabelValues(swBuffers).Set(0)
	}
	a.mu.Unlock()

	v := 0.0
	if on {
		v = 1
	}
	a.switches.WithLabelValues(name).Set(v)
	if changed {
		attrs := []any{"switch", name, "from", switchString(!on), "to", switchString(on), "source", source}
		if released > 0 {
			attrs = append(attrs, "releasedBytes", released)
		}
		a.log.Info("switch changed", attrs...)
	}
	return changed, nil
}

// residentBytes allocates n bytes and writes every page so they count in RSS,
// not only in the heap.
func residentBytes(n int64) []byte {
	b := make([]byte, n)
	for i := 0; i < len(b); i += pageSize {
		b[i] = 1
	}
	return b
}

// work is one request's cost: CPU time (plus profiling's overhead), a dropped
// allocation, and memory tracking's retained chunk.
func (a *app) work(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	a.mu.Lock()
	profiling, tracking := a.profiling, a.tracking
	a.mu.Unlock()

	cpu, extra := a.cfg.WorkCPU, time.Duration(0)
	if profiling {
		extra = time.Duration(float64(a.cfg.WorkCPU) * a.cfg.ProfilingOverhead)
		cpu += extra
	}
	sum := burnCPU(cpu)
	a.cpuSpent.Add(cpu.Seconds())
	a.switchCPU.Add(extra.Seconds())
	a.mu.Lock()
	if a.profiling == profiling { // counted in the state it was served in
		a.stateReqs[boolIndex(profiling)]++
	}
	a.mu.Unlock()

	if a.cfg.WorkAlloc > 0 {
		buf := make([]byte, a.cfg.WorkAlloc)
		for i := 0; i < len(buf); i += pageSize {
			buf[i] = byte(i)
		}
		sum += uint64(buf[len(buf)-1])
	}
	if tracking && a.cfg.TrackingBytes > 0 {
		chunk := residentBytes(a.cfg.TrackingBytes)
		a.mu.Lock()
		if a.tracking { // not switched off while the chunk was made
			a.tracked = append(a.tracked, chunk)
			a.trackedN += int64(len(chunk))
			a.retained.WithLabelValues(swMemoryTracking).Set(float64(a.trackedN))
		}
		a.mu.Unlock()
	}

	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = fmt.Fprintf(w, "ok cpu=%s alloc=%d profiling=%s memory-tracking=%s sum=%x\n",
		cpu, a.cfg.WorkAlloc, switchString(profiling), switchString(tracking), sum&0xff)
	a.requests.WithLabelValues("200").Inc()
	a.durations.Observe(time.Since(start).Seconds())
}

// mainHandler serves the load's target (/work and /), /metrics and /healthz.
func (a *app) mainHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/work", a.work)
	mux.HandleFunc("/{$}", a.work)
	mux.Handle("GET /metrics", promhttp.HandlerFor(a.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", healthz)
	return mux
}

func healthz(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") }

// maxBody bounds what the admin endpoint reads; a switch value is a word.
const maxBody = 1 << 10

// adminHandler serves the switches the way the operator's HTTP toggle drives
// them: POST (or PUT) /admin/<switch> with body "on" or "off" sets one, GET
// reads it, GET /admin lists them all. With an empty body the value may come
// from the query (?state=on, ?value=on or ?enabled=true).
func (a *app) adminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", healthz)
	mux.HandleFunc("GET /admin", func(w http.ResponseWriter, _ *http.Request) {
		for _, n := range switchNames {
			on, _ := a.state(n)
			_, _ = fmt.Fprintf(w, "%s=%s\n", n, switchString(on))
		}
	})
	mux.HandleFunc("/admin/{switch}", a.admin)
	return mux
}

func (a *app) admin(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("switch")
	on, ok := a.state(name)
	if !ok {
		http.Error(w, fmt.Sprintf("unknown switch %q: want one of %s", name, strings.Join(switchNames, ", ")), http.StatusNotFound)
		return
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		_, _ = io.WriteString(w, switchString(on)+"\n")
		return
	case http.MethodPost, http.MethodPut:
	default:
		w.Header().Set("Allow", "GET, POST, PUT")
		http.Error(w, "method "+r.Method+" not allowed: GET reads a switch, POST or PUT sets it", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		http.Error(w, "reading body: "+err.Error(), http.StatusBadRequest)
		return
	}
	if len(body) > maxBody {
		http.Error(w, "body too large: want on or off", http.StatusBadRequest)
		return
	}
	value := strings.TrimSpace(string(body))
	if value == "" {
		q := r.URL.Query()
		for _, k := range []string{"state", "value", "enabled"} {
			if q.Has(k) {
				value = q.Get(k)
				break
			}
		}
	}
	if value == "" {
		http.Error(w, "missing value: send body on or off (or true|false, 1|0) to "+r.URL.Path, http.StatusBadRequest)
		return
	}
	want, err := parseSwitch(value)
	if err != nil {
		http.Error(w, name+": "+err.Error(), http.StatusBadRequest)
		return
	}
	a.switchReq.WithLabelValues(name, switchString(want)).Inc()
	changed, err := a.set(name, want, "admin "+r.RemoteAddr)
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	_, _ = io.WriteString(w, name+"="+switchString(want)+" changed="+strconv.FormatBool(changed)+"\n")
}
