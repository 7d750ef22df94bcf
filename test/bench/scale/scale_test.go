package scale

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
	"perfexp.dev/perf-operator/internal/testenv"
)

var (
	scaleFlag = flag.Bool("scale", false, "run the scale benchmark (N=5 sanity run unless -scale.n is given)")
	sizeFlag  = flag.Int("scale.n", 0, "experiments running at once (100 or 1000 for the real benchmark)")
)

const ns = "bench"

// operatorUser is the manager's identity: not in system:masters (the test's
// own identity is), so the apiserver's priority-and-fairness metrics tell its
// requests apart from the test's (flow schema global-default, not exempt).
const operatorUser = "perf-operator"

// params is one run's shape. The real benchmark samples every 15 s, the
// sanity run every 5 s; both with the shortest windows admission takes for a
// toggle measured through Prometheus (perfv1.MinMeasuredWindow: 2m30s and
// 1m30s), so every run's analysis has its samples.
type params struct {
	n                   int
	interval            time.Duration
	baseline, treatment time.Duration
	toggleTimeout       string
	sanity              bool
}

func paramsFromFlags() (params, bool) {
	n := *sizeFlag
	enabled := *scaleFlag
	if v := os.Getenv("PERF_BENCH_SCALE"); v != "" && v != "0" {
		enabled = true
		if k, err := strconv.Atoi(v); err == nil && k > 1 && n == 0 {
			n = k
		}
	}
	if !enabled {
		return params{}, false
	}
	p := params{n: n, interval: 15 * time.Second, toggleTimeout: "30s"}
	if n <= 1 {
		p = params{n: 5, interval: 5 * time.Second, toggleTimeout: "10s", sanity: true}
	}
	// The experiments' spec but for the windows, which it decides.
	spec := experiment(p, 0, 1, "http://prometheus:9090").Spec
	p.baseline, _ = spec.MinMeasuredWindow(p.interval)
	p.treatment = p.baseline
	return p, true
}

// The experiments: index 0's target never answers its admin endpoint (its
// toggle hangs for toggleTimeout, then its revert, retried); index 1's working
// set jumps above the memory guardrail two intervals after its toggle went on.
const (
	hangIndex   = 0
	breachIndex = 1
)

func experiment(p params, i int, port int32, promURL string) *perfv1.PerfExperiment {
	return &perfv1.PerfExperiment{
		ObjectMeta: metav1.ObjectMeta{Name: targetName(i), Namespace: ns},
		Spec: perfv1.PerfExperimentSpec{
			Target:  perfv1.TargetSpec{Deployment: targetName(i), URL: "http://" + targetName(i) + "." + ns + ".svc:8080"},
			Load:    perfv1.LoadSpec{Requests: []perfv1.RequestSpec{{Path: "/", Weight: 1}}},
			Stages:  []perfv1.StageSpec{{QPS: 10}},
			Windows: perfv1.WindowsSpec{Baseline: perfv1.Duration(p.baseline.String()), Treatment: perfv1.Duration(p.treatment.String()), Settle: "0s"},
			Metrics: perfv1.MetricsSpec{Source: perfv1.MetricsSourcePrometheus, Interval: perfv1.Duration(p.interval.String()),
				Prometheus: &perfv1.PrometheusSpec{URL: promURL}},
			Toggle: &perfv1.ToggleSpec{HTTP: &perfv1.HTTPToggle{Port: port, Timeout: perfv1.Duration(p.toggleTimeout),
				HTTPRequest: perfv1.HTTPRequest{Path: "/admin/profiling", Method: "POST", Body: "on"},
				Revert:      perfv1.HTTPRequest{Path: "/admin/profiling", Method: "POST", Body: "off"}}},
		},
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// parallel runs f(0..n-1) on a few goroutines and returns the first error.
func parallel(n, workers int, f func(i int) error) error {
	var next atomic.Int64
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					once.Do(func() { first = fmt.Errorf("item %d: %w", i, err) })
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

func TestScale(t *testing.T) {
	p, ok := paramsFromFlags()
	if !ok {
		t.Skip("scale benchmark: run with -scale [-scale.n=100|1000] or PERF_BENCH_SCALE=<N> (make bench-scale)")
	}
	ctrllog.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "perfexp-scale-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "manager")
	// Built as the image builds it (hack/image.sh): the RSS measured is the
	// shipped binary's.
	if err := testenv.GoBuildAsShipped(bin, "./cmd/manager"); err != nil {
		t.Fatal(err)
	}

	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(perfv1.AddToScheme(scheme))

	// The test's own client, counted, fast enough to create a thousand
	// objects in seconds.
	var own atomic.Int64
	ownKinds := &byKind{}
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 1000, 2000
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return counting{n: &own, by: ownKinds, next: rt} })
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	core, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := operatorKubeconfig(ctx, env, c, dir)
	if err != nil {
		t.Fatal(err)
	}

	prom, err := newFakeProm()
	if err != nil {
		t.Fatal(err)
	}
	defer prom.close()
	admins := make([]*admin, p.n)
	defer func() {
		for _, a := range admins {
			if a != nil {
				a.close()
			}
		}
	}()
	for i := range admins {
		if admins[i], err = newAdmin(targetIP(i), i == hangIndex); err != nil {
			t.Fatal(err)
		}
	}
	if err := parallel(p.n, 16, func(i int) error { return createTarget(ctx, c, ns, i) }); err != nil {
		t.Fatal(err)
	}

	// The test reads through its own informers: the world and the progress
	// checks add watches, not polling, to the apiserver's load.
	cc, err := cache.New(cfg, cache.Options{Scheme: scheme, DefaultNamespaces: map[string]cache.Config{ns: {}}})
	if err != nil {
		t.Fatal(err)
	}
	cctx, stopCache := context.WithCancel(ctx)
	defer stopCache()
	for _, o := range []client.Object{&perfv1.PerfExperiment{}} {
		if _, err := cc.GetInformer(cctx, o); err != nil {
			t.Fatal(err)
		}
	}
	go func() { _ = cc.Start(cctx) }()
	w := startWorld(c, cc, ns)
	defer w.close()
	if !cc.WaitForCacheSync(cctx) {
		t.Fatal("test informers never synced")
	}

	before, err := scrapeAPIServer(ctx, core.RESTClient())
	if err != nil {
		t.Fatal(err)
	}
	watchesBefore := before.sum("apiserver_longrunning_requests", `verb="WATCH"`)

	m := startManager(t, bin, kubeconfig, dir)
	loadStart := loadAvg()
	// Whole runs: from before the first experiment is created until the last
	// has ended, every run's start and ending are in, once each, whatever the
	// machine's pace; the steady window below holds only part of the endings.
	wholeFrom := m.snapshot(ctx, core, &own, ownKinds, prom, admins)

	// Create the experiments: the hanging one and the breached one first, so
	// their toggles go on close together.
	created := time.Now()
	if err := parallel(p.n, 16, func(i int) error {
		return c.Create(ctx, experiment(p, i, admins[i].port(), prom.url()))
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("created %d experiments in %s", p.n, time.Since(created).Round(time.Millisecond))

	res := result{p: p, loadStart: loadStart}
	// Phase 1: until every experiment has started, and the breach is set up.
	deadline := created.Add(p.baseline + p.treatment + 5*time.Minute)
	var steadyFrom snapshot
	var steadyStarted bool
	var injected time.Time
	hangBusyAtInjection := false
	lastLog, lastGauges := time.Now(), time.Time{}
	steadyLen := p.baseline + p.treatment
	for time.Now().Before(deadline) {
		time.Sleep(time.Second)
		var list perfv1.PerfExperimentList
		if err := cc.List(ctx, &list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		started, terminal := 0, 0
		var last time.Time
		byName := map[string]*perfv1.PerfExperiment{}
		for i := range list.Items {
			e := &list.Items[i]
			byName[e.Name] = e
			if e.Status.StartTime != nil {
				started++
				if st := e.Status.StartTime.Time; st.After(last) {
					last = st
				}
			}
			if e.Status.Phase.IsTerminal() {
				terminal++
			}
		}
		if res.allStartedSeen == 0 && started == p.n {
			res.allStarted = last.Sub(created.Truncate(time.Second))
			res.allStartedSeen = time.Since(created)
		}
		if !steadyStarted && started == p.n {
			steadyFrom = m.snapshot(ctx, core, &own, ownKinds, prom, admins)
			steadyStarted = true
		}
		// RSS from /proc costs the manager nothing; its /metrics is scraped
		// every 10 s (a real Prometheus scrapes every 30 s), so the
		// benchmark's own reads do not show up as the manager's CPU.
		if steadyStarted && time.Since(lastGauges) >= 10*time.Second {
			m.sampleGauges(&res)
			lastGauges = time.Now()
		}
		if time.Since(lastLog) >= 30*time.Second {
			t.Logf("%s: %d of %d started, %d ended", time.Since(created).Round(time.Second), started, p.n, terminal)
			lastLog = time.Now()
		}
		b := byName[targetName(breachIndex)]
		if injected.IsZero() && b != nil && b.Status.Toggle != nil && b.Status.Toggle.AppliedAt != nil && b.Status.Toggle.Applied &&
			time.Since(b.Status.Toggle.AppliedAt.Time) >= 2*p.interval {
			hangBusyAtInjection = admins[hangIndex].inFlight.Load() > 0
			injected = prom.breachPod(targetName(breachIndex) + "-0")
		}
		if !injected.IsZero() && res.breachSeen == 0 && b != nil && b.Status.Phase.IsTerminal() {
			res.breachSeen = time.Since(injected)
			res.breachPhase = string(b.Status.Phase)
			if b.Status.Abort != nil {
				res.breachReason = b.Status.Abort.Reason
				res.breachAt = b.Status.Abort.At.Sub(injected)
			}
			res.hangBusy = hangBusyAtInjection
		}
		if steadyStarted && time.Since(steadyFrom.at) >= steadyLen && res.steady.at.IsZero() {
			res.steady = m.snapshot(ctx, core, &own, ownKinds, prom, admins).minus(steadyFrom)
			after, err := scrapeAPIServer(ctx, core.RESTClient())
			if err == nil {
				res.watches = after.sum("apiserver_longrunning_requests", `verb="WATCH"`) - watchesBefore
			}
			res.loadEnd = loadAvg()
			res.endedInWindow = terminal
		}
		if terminal == p.n && res.whole.at.IsZero() {
			res.whole = m.snapshot(ctx, core, &own, ownKinds, prom, admins).minus(wholeFrom)
		}
		if terminal == p.n && !res.steady.at.IsZero() {
			res.phases = map[string]int{}
			for _, e := range list.Items {
				res.phases[string(e.Status.Phase)]++
			}
			break
		}
	}
	m.stop(t)
	res.print(t)
	res.check(t)
}

// operatorKubeconfig writes a kubeconfig for operatorUser, bound to
// cluster-admin.
func operatorKubeconfig(ctx context.Context, env *testenv.Env, c client.Client, dir string) (string, error) {
	u, err := env.AddUser(envtest.User{Name: operatorUser}, nil)
	if err != nil {
		return "", err
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "perf-operator-bench"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: operatorUser}},
	}
	if err := c.Create(ctx, crb); err != nil {
		return "", err
	}
	b, err := u.KubeConfig()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "kubeconfig-operator")
	return path, os.WriteFile(path, b, 0o600)
}

// managerProc is the operator binary running as a process.
type managerProc struct {
	cmd     *exec.Cmd
	metrics string
	log     string
	exited  chan struct{}
	// apiserver is the kube-apiserver's pid (0 when not found): its CPU is
	// what the operator's requests and watches cost the control plane.
	apiserver int
}

func startManager(t *testing.T, bin, kubeconfig, dir string) *managerProc {
	t.Helper()
	mport, pport := freePort(t), freePort(t)
	// Cluster-wide, as the chart installs it by default; add
	// --watch-namespaces=bench through PERF_BENCH_MANAGER_ARGS to compare.
	args := []string{"--kubeconfig", kubeconfig,
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", mport), "--health-probe-bind-address=0",
		// The harness scrapes /metrics over plain HTTP and every experiment is the
		// admin's: neither the metrics auth nor the requester checks are measured.
		"--authorize-requesters=false", "--metrics-secure=false"}
	if os.Getenv("PERF_BENCH_PPROF") != "" {
		args = append(args, fmt.Sprintf("--pprof-bind-address=127.0.0.1:%d", pport))
		t.Logf("pprof at http://127.0.0.1:%d/debug/pprof/", pport)
	}
	args = append(args, strings.Fields(os.Getenv("PERF_BENCH_MANAGER_ARGS"))...)
	logPath := filepath.Join(dir, "manager.log")
	if keep := os.Getenv("PERF_BENCH_LOG"); keep != "" {
		logPath = keep
	}
	logs, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), strings.Fields(os.Getenv("PERF_BENCH_MANAGER_ENV"))...)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	m := &managerProc{cmd: cmd, metrics: fmt.Sprintf("http://127.0.0.1:%d/metrics", mport), log: logPath, exited: make(chan struct{}), apiserver: childPID("kube-apiserver")}
	go func() { _ = cmd.Wait(); logs.Close(); close(m.exited) }()
	t.Logf("manager pid %d, args %v, log %s; kube-apiserver pid %d", cmd.Process.Pid, args, logPath, m.apiserver)
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if _, err := scrapeURL(m.metrics); err == nil {
			break
		}
		if time.Now().After(deadline) {
			m.stop(t)
			t.Fatal("the manager's /metrics never answered")
		}
	}
	return m
}

func (m *managerProc) stop(t *testing.T) {
	select {
	case <-m.exited:
		return
	default:
	}
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.exited:
	case <-time.After(40 * time.Second):
		_ = m.cmd.Process.Kill()
		<-m.exited
	}
	if t.Failed() {
		b, _ := os.ReadFile(m.log)
		if len(b) > 4000 {
			b = b[len(b)-4000:]
		}
		t.Logf("manager log (tail):\n%s", b)
	}
}

func (m *managerProc) snapshot(ctx context.Context, core *kubernetes.Clientset, own *atomic.Int64, ownKinds *byKind, prom *fakeProm, admins []*admin) snapshot {
	s := snapshot{at: time.Now(), own: own.Load(), queries: prom.queries.Load(), probes: prom.probes.Load(), shared: prom.shared.Load()}
	mine := ownKinds.snapshot()
	s.cpu, _ = procCPU(m.cmd.Process.Pid)
	if m.apiserver != 0 {
		s.apiCPU, _ = procCPU(m.apiserver)
	}
	if mt, err := scrapeURL(m.metrics); err == nil {
		s.reconciles = mt.sum("controller_runtime_reconcile_total")
		s.clientReqs = mt.sum("rest_client_requests_total")
		s.allocated = mt.sum("go_memstats_alloc_bytes_total")
		s.gcs = mt.sum("go_gc_duration_seconds_count")
	}
	if at, err := scrapeAPIServer(ctx, core.RESTClient()); err == nil {
		s.apiTotal = at.sum("apiserver_request_total")
		s.apiFlow = at.sum("apiserver_flowcontrol_dispatched_requests_total", `flow_schema="global-default"`)
		s.kinds = apiserverKinds(at)
		for k, v := range mine {
			s.kinds[k] -= v
		}
	}
	for _, a := range admins {
		s.adminReqs += a.requests.Load()
	}
	return s
}

// sampleGauges records the manager's RSS and goroutines, keeping the peaks.
func (m *managerProc) sampleGauges(r *result) {
	if rss, file, anon, err := procRSS(m.cmd.Process.Pid); err == nil {
		r.rss = rss
		if rss > r.rssMax {
			r.rssMax, r.rssFileAtMax, r.rssAnonAtMax = rss, file, anon
		}
	}
	if mt, err := scrapeURL(m.metrics); err == nil {
		r.heapMax = max(r.heapMax, int64(mt.sum("go_memstats_heap_inuse_bytes")))
		g := int(mt.sum("go_goroutines"))
		r.goroutines = g
		r.goroutinesMax = max(r.goroutinesMax, g)
	}
}

type result struct {
	p                          params
	loadStart, loadEnd         string
	rss, rssMax                int64
	rssFileAtMax, rssAnonAtMax int64
	// whole is creation → every experiment ended.
	whole                     snapshot
	heapMax                   int64
	goroutines, goroutinesMax int
	steady                    snapshot
	watches                   float64
	allStarted                time.Duration // last status.startTime − first creation
	allStartedSeen            time.Duration
	// endedInWindow is how many experiments had ended when the window
	// closed: the window is as long as a run, so how many endings (reverts,
	// lock releases, summaries, events) fall into it moves its request and
	// CPU figures from run to run.
	endedInWindow             int
	breachSeen, breachAt      time.Duration
	breachPhase, breachReason string
	hangBusy                  bool
	phases                    map[string]int
}

func (r *result) print(t *testing.T) {
	n := float64(r.p.n)
	var b strings.Builder
	fmt.Fprintf(&b, "\nscale benchmark: N=%d experiments, interval %s, windows %s+%s, %d cores, load average %s → %s\n",
		r.p.n, r.p.interval, r.p.baseline, r.p.treatment, numCPU(), r.loadStart, r.loadEnd)
	fmt.Fprintf(&b, "steady window %s from the moment every experiment had started (windows opening and closing, toggles applied and reverted)\n\n", r.steady.dur.Round(time.Second))
	row := func(what, val, bar string, ok bool) {
		mark := "ok"
		if !ok {
			mark = "MISSED"
		}
		if bar == "" {
			mark = ""
		}
		fmt.Fprintf(&b, "| %-44s | %-22s | %-14s | %-6s |\n", what, val, bar, mark)
	}
	fmt.Fprintf(&b, "| %-44s | %-22s | %-14s | %-6s |\n|%s|%s|%s|%s|\n", "what", "measured", "bar", "", strings.Repeat("-", 46), strings.Repeat("-", 24), strings.Repeat("-", 16), strings.Repeat("-", 8))
	s := r.steady
	d := r.steady.dur.Seconds()
	if d <= 0 {
		d = 1
	}
	row("manager RSS (end of window / peak)", fmt.Sprintf("%.1f / %.1f MB", mb(r.rss), mb(r.rssMax)), "≤ 80 MB", mb(r.rssMax) <= 80)
	row("  files (binary) / anonymous, at the peak", fmt.Sprintf("%.1f / %.1f MB", mb(r.rssFileAtMax), mb(r.rssAnonAtMax)), "", true)
	row("  Go heap in use (peak)", fmt.Sprintf("%.1f MB", mb(r.heapMax)), "", true)
	row("manager goroutines (end / peak)", fmt.Sprintf("%d / %d", r.goroutines, r.goroutinesMax), "≤ 100", r.goroutinesMax <= 100)
	cores := s.cpu.Seconds() / d
	row("manager CPU", fmt.Sprintf("%.4f cores", cores), "≤ 0.05 cores", cores <= 0.05)
	if s.apiCPU > 0 {
		row("apiserver CPU (every client's requests)", fmt.Sprintf("%.4f cores", s.apiCPU.Seconds()/d), "", true)
	}
	row("  allocated / garbage collections per second", fmt.Sprintf("%.2f MB / %.2f", mb(int64(s.allocated))/d, s.gcs/d), "", true)
	rec := s.reconciles / d / n
	row("reconciles/s per experiment", fmt.Sprintf("%.4f (%.1f/s)", rec, s.reconciles/d), "≤ 0.1", rec <= 0.1)
	flow := s.apiFlow / d / n
	row("API requests/s per experiment (apiserver)", fmt.Sprintf("%.4f (%.1f/s)", flow, s.apiFlow/d), "", true)
	row("  apiserver total − test's own, per exp.", fmt.Sprintf("%.4f", (s.apiTotal-float64(s.own))/d/n), "", true)
	row("  manager's rest_client_requests, per exp.", fmt.Sprintf("%.4f", s.clientReqs/d/n), "", true)
	q := float64(s.queries) / d / n
	row("metrics queries/s per experiment", fmt.Sprintf("%.4f (%.1f/s)", q, float64(s.queries)/d), "", true)
	row("  source checks / shared / one target's", fmt.Sprintf("%d / %d / %d", s.probes, s.shared, s.queries-s.probes-s.shared), "", true)
	tot := flow + q
	row("API + metrics requests/s per experiment", fmt.Sprintf("%.4f", tot), "≤ 0.05", tot <= 0.05)
	row("admin (toggle) requests in the window", fmt.Sprintf("%d", s.adminReqs), "", true)
	row("experiments ended by the window's end", fmt.Sprintf("%d", r.endedInWindow), "", true)
	row("watches the operator opened", fmt.Sprintf("%.0f", r.watches), "", true)
	row("every experiment started (status.startTime)", fmt.Sprintf("%s (seen %s)", r.allStarted.Round(time.Second), r.allStartedSeen.Round(100*time.Millisecond)), "≤ 30 s", r.allStarted > 0 && r.allStarted <= 30*time.Second)
	bok := r.breachSeen > 0 && r.breachSeen <= 2*r.p.interval && r.breachPhase == string(perfv1.PhaseAborted)
	row("breach → Aborted, another target hanging", fmt.Sprintf("%s (abort.at %s) %s", r.breachSeen.Round(100*time.Millisecond), r.breachAt.Round(time.Second), r.breachReason),
		fmt.Sprintf("≤ %s", 2*r.p.interval), bok)
	row("  hang in flight at the breach", fmt.Sprint(r.hangBusy), "", true)
	if w := r.whole; !w.at.IsZero() {
		wd := w.dur.Seconds()
		fmt.Fprintf(&b, "\nwhole runs, from before the first experiment was created until the last ended (%s): every start and every ending once\n", w.dur.Round(time.Second))
		fmt.Fprintf(&b, "  per run: %.1f ms CPU, %.2f API requests, %.3f metrics queries, %.2f reconciles, %.0f kB allocated, %.3f garbage collections\n",
			w.cpu.Seconds()*1000/n, w.apiFlow/n, float64(w.queries)/n, w.reconciles/n, w.allocated/1000/n, w.gcs/n)
		fmt.Fprintf(&b, "  over the whole: %.4f cores, %.4f API + metrics requests/s and %.4f reconciles/s per experiment\n",
			w.cpu.Seconds()/wd, (w.apiFlow+float64(w.queries))/wd/n, w.reconciles/wd/n)
		fmt.Fprintf(&b, "  apiserver requests per run by verb and resource:")
		for _, k := range byCount(w.kinds) {
			if v := w.kinds[k] / n; v >= 0.005 {
				fmt.Fprintf(&b, " %s %.2f;", k, v)
			}
		}
		fmt.Fprintln(&b)
	}
	fmt.Fprintf(&b, "\nendings: %v\n", sortedPhases(r.phases))
	fmt.Fprintf(&b, "apiserver requests in the window by verb and resource, the test's own taken out (per experiment per minute):\n")
	for _, k := range byCount(s.kinds) {
		fmt.Fprintf(&b, "  %-40s %7.0f  %.3f/min\n", k, s.kinds[k], s.kinds[k]/d/n*60)
	}
	fmt.Println(b.String())
}

// check fails the run only where the harness itself did not work; the bars are
// printed, not asserted (a shared machine's numbers are not a unit test's).
func (r *result) check(t *testing.T) {
	if r.steady.at.IsZero() {
		t.Errorf("the steady window never completed (not every experiment started?)")
	}
	if r.breachPhase != string(perfv1.PhaseAborted) {
		t.Errorf("the breached experiment ended %q, want Aborted", r.breachPhase)
	}
	if r.steady.queries == 0 || r.steady.reconciles == 0 {
		t.Errorf("no metrics queries or reconciles in the steady window: %+v", r.steady)
	}
	if r.phases[string(perfv1.PhaseSucceeded)] < r.p.n-2 {
		t.Errorf("endings %v: want every experiment but the hanging and the breached one Succeeded", r.phases)
	}
}

// byCount returns the keys of m, largest count first.
func byCount(m map[string]float64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] })
	return keys
}

func sortedPhases(m map[string]int) string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}

func numCPU() int { return goruntime.NumCPU() }

func mb(b int64) float64 { return float64(b) / (1 << 20) }
