// Package crash kills the operator for real: a manager built with
// -tags faultinject sends itself SIGKILL right after one side effect (a toggle
// sent, a Job created, the lock taken or released) and before the status write
// that records it. The test restarts it and checks the promise of docs and
// README: no toggle left applied, no Job created twice, the target's template
// byte for byte as it was, and each target pod sent exactly the requests the
// crash explains.
//
// The test plays the parts envtest does not run (Deployment controller, Job
// controller, kubelet) on the real clock, with one-stage experiments of 20 s
// windows; the target pods' addresses are loopback addresses (127.0.0.x) where
// a real HTTP server plays each pod's admin endpoint.
package crash

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
	"perfexp.dev/perf-operator/internal/testenv"
)

var (
	env     *testenv.Env
	k8s     client.Client
	manager string // the faultinject manager binary
	kubecfg string
	dir     string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(perfv1.AddToScheme(scheme))
	var err error
	if env, err = testenv.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer env.Stop()
	if k8s, err = client.New(env.Config, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if dir, err = os.MkdirTemp("", "perfexp-crash-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	manager = filepath.Join(dir, "manager")
	if err := testenv.GoBuild(manager, "./cmd/manager", "-tags", "faultinject"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if kubecfg, err = env.AdminKubeconfig(dir, "operator"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// admin plays one pod's stateful admin endpoint: "on" while on answers 409
// Conflict (as the field report's endpoint did), "off" is idempotent.
type admin struct {
	srv *http.Server
	ln  net.Listener
	mu  sync.Mutex
	on  bool
	// level is the variant switched on by "on:<level>" (a feature with
	// several settings): only "off:<level>" switches it off again.
	level string
	got   []string // "on", "on=409", "off"; "on:a", "on:a=409", "off:a"
}

// adminPort is every pod's admin port: each pod has its own loopback address, so
// they share one port, which the manager's exec stand-in (PERFEXP_EXEC_VIA_HTTP)
// needs.
const adminPort = 18081

func newAdmin(t *testing.T, ip string) *admin {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(adminPort)))
	if err != nil {
		t.Fatal(err)
	}
	a := &admin{ln: ln}
	a.srv = &http.Server{Handler: http.HandlerFunc(a.serve), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = a.srv.Serve(ln) }()
	t.Cleanup(func() { _ = a.srv.Close() })
	return a
}

func (a *admin) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	a.mu.Lock()
	defer a.mu.Unlock()
	body := string(b)
	switch {
	case strings.HasPrefix(body, "on:"):
		if a.on {
			a.got = append(a.got, body+"=409")
			w.WriteHeader(http.StatusConflict)
			return
		}
		a.on, a.level = true, strings.TrimPrefix(body, "on:")
		a.got = append(a.got, body)
		return
	case strings.HasPrefix(body, "off:"):
		// Another setting's switch-back leaves this one on.
		if a.level == strings.TrimPrefix(body, "off:") {
			a.on, a.level = false, ""
		}
		a.got = append(a.got, body)
		return
	}
	switch body {
	case "on":
		if a.on {
			a.got = append(a.got, "on=409")
			w.WriteHeader(http.StatusConflict)
			return
		}
		a.on = true
		a.got = append(a.got, "on")
	case "off":
		a.on = false
		a.got = append(a.got, "off")
	}
}

func (a *admin) state() (bool, []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.on, slices.Clone(a.got)
}

// world plays the controllers envtest lacks for one namespace, on the real
// clock: Deployments roll out at once, a Job's pod starts at once and finishes
// with a k6 result when its window has elapsed. It records every Job UID.
type world struct {
	t      *testing.T
	ns     string
	mu     sync.Mutex
	jobUID map[string]types.UID
	dupes  []string
	stop   chan struct{}
	done   chan struct{}
}

func startWorld(t *testing.T, ns string) *world {
	w := &world{t: t, ns: ns, jobUID: map[string]types.UID{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-tick.C:
				w.tick()
			}
		}
	}()
	t.Cleanup(func() { close(w.stop); <-w.done })
	return w
}

func (w *world) tick() {
	ctx := context.Background()
	var deps appsv1.DeploymentList
	if err := k8s.List(ctx, &deps, client.InNamespace(w.ns)); err == nil {
		for i := range deps.Items {
			d := &deps.Items[i]
			if d.Status.ObservedGeneration < d.Generation {
				n := *d.Spec.Replicas
				d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n}
				_ = k8s.Status().Update(ctx, d)
			}
		}
	}
	var jobs batchv1.JobList
	if err := k8s.List(ctx, &jobs, client.InNamespace(w.ns)); err == nil {
		for i := range jobs.Items {
			w.runJob(&jobs.Items[i])
		}
	}
}

func (w *world) runJob(job *batchv1.Job) {
	w.mu.Lock()
	if uid, ok := w.jobUID[job.Name]; ok && uid != job.UID {
		w.dupes = append(w.dupes, job.Name)
	}
	w.jobUID[job.Name] = job.UID
	w.mu.Unlock()
	if job.DeletionTimestamp != nil || job.Status.CompletionTime != nil {
		return
	}
	ctx := context.Background()
	pod := &corev1.Pod{}
	key := client.ObjectKey{Namespace: w.ns, Name: job.Name + "-0"}
	if err := k8s.Get(ctx, key, pod); err != nil {
		pod = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: w.ns, Labels: job.Spec.Template.Labels}, Spec: job.Spec.Template.Spec}
		pod.Labels[batchv1.JobNameLabel] = job.Name
		if err := k8s.Create(ctx, pod); err != nil {
			return
		}
		pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
			Name: "k6", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}}}}
		_ = k8s.Status().Update(ctx, pod)
		return
	}
	if len(pod.Status.ContainerStatuses) == 0 || pod.Status.ContainerStatuses[0].State.Running == nil {
		return
	}
	started := pod.Status.ContainerStatuses[0].State.Running.StartedAt
	qps, dur := testenv.K6Window(job)
	if time.Now().Before(started.Add(dur)) {
		return
	}
	end := metav1.NewTime(started.Add(dur))
	pod.Status.Phase = corev1.PodSucceeded
	pod.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		StartedAt: started, FinishedAt: end, Message: testenv.K6Result(job.Name, qps, dur, started.Time)}}
	if err := k8s.Status().Update(ctx, pod); err != nil {
		return
	}
	testenv.CompleteJob(job, started, end)
	_ = k8s.Status().Update(ctx, job)
}

// operatorProcess is one run of the manager binary, confined to a namespace.
type operatorProcess struct {
	cmd    *exec.Cmd
	exited chan *os.ProcessState
	log    string
}

func startOperator(t *testing.T, ns, killAfter string, n int) *operatorProcess {
	t.Helper()
	logPath := filepath.Join(dir, fmt.Sprintf("%s-%d.log", ns, n))
	logs, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(manager, "--kubeconfig", kubecfg, "--watch-namespaces", ns, "--exec-toggles",
		"--metrics-bind-address=0", "--health-probe-bind-address=0",
		// Requester checks are tested in controllers/tenant_test.go; here every
		// experiment is the admin's and no requester policy is installed.
		"--authorize-requesters=false")
	cmd.Env = append(os.Environ(), "PERFEXP_KILL_AFTER="+killAfter, "PERFEXP_EXEC_VIA_HTTP="+strconv.Itoa(adminPort))
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &operatorProcess{cmd: cmd, exited: make(chan *os.ProcessState, 1), log: logPath}
	go func() { _ = cmd.Wait(); logs.Close(); p.exited <- cmd.ProcessState }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("manager log %s (last 3000 bytes):\n%s", logPath, tail(b, 3000))
		}
	})
	return p
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// killedBySIGKILL waits for the process to die of the fault it was given.
func (p *operatorProcess) killedBySIGKILL(t *testing.T) {
	t.Helper()
	select {
	case st := <-p.exited:
		ws, ok := st.Sys().(syscall.WaitStatus)
		if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			b, _ := os.ReadFile(p.log)
			t.Fatalf("manager ended with %v, not SIGKILL; log:\n%s", st, tail(b, 3000))
		}
	case <-time.After(3 * time.Minute):
		b, _ := os.ReadFile(p.log)
		t.Fatalf("the fault point was never reached; log:\n%s", tail(b, 3000))
	}
}

func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "crash-"}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// target creates the one-replica Deployment app and its pod at ip.
func target(t *testing.T, ns, ip string) { targetNamed(t, ns, "app", ip) }

// targetNamed creates a one-replica Deployment and its pod at ip, Running and
// Ready (runtime toggles reach it there).
func targetNamed(t *testing.T, ns, name, ip string) {
	t.Helper()
	ctx := context.Background()
	labels := map[string]string{"app": name}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "app", Image: "registry.local/app:1",
					Env: []corev1.EnvVar{{Name: "MODE", Value: "prod"}},
					Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
						corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}},
				}}},
			},
		},
	}
	if err := k8s.Create(ctx, dep); err != nil {
		t.Fatal(err)
	}
	dep.Status = appsv1.DeploymentStatus{ObservedGeneration: dep.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}
	if err := k8s.Status().Update(ctx, dep); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name + "-0", Namespace: ns, Labels: labels}, Spec: *dep.Spec.Template.Spec.DeepCopy()}
	if err := k8s.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
		Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}}}}
	if err := k8s.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
}

func templateJSON(t *testing.T, ns string) (string, *appsv1.Deployment) {
	return templateOf(t, ns, "app")
}

// templateOf is a Deployment's pod template, byte for byte, and the Deployment.
func templateOf(t *testing.T, ns, name string) (string, *appsv1.Deployment) {
	t.Helper()
	dep := &appsv1.Deployment{}
	if err := k8s.Get(context.Background(), objectKey(ns, name), dep); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(dep.Spec.Template)
	return string(b), dep
}

func objectKey(ns, name string) client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: name} }

// toggleOf is a toggle of the kind whose "on" and "off" reach a pod's admin
// endpoint (http directly, exec through the manager's stand-in), or an env toggle.
func toggleOf(kind string) perfv1.ToggleSpec {
	on := "on"
	switch kind {
	case "http":
		return perfv1.ToggleSpec{HTTP: &perfv1.HTTPToggle{Port: adminPort, Timeout: "5s",
			HTTPRequest: perfv1.HTTPRequest{Path: "/admin/profiling", Body: "on"},
			Revert:      perfv1.HTTPRequest{Path: "/admin/profiling", Body: "off"}}}
	case "exec":
		return perfv1.ToggleSpec{Exec: &perfv1.ExecToggle{Command: []string{"on"}, Revert: []string{"off"}, Timeout: "5s"}}
	}
	return perfv1.ToggleSpec{Env: &perfv1.EnvToggle{Name: "PROFILING", Value: &on}}
}

func experiment(ns string, toggle perfv1.ToggleSpec) *perfv1.PerfExperiment {
	return &perfv1.PerfExperiment{
		ObjectMeta: metav1.ObjectMeta{Name: "crash", Namespace: ns},
		Spec: perfv1.PerfExperimentSpec{
			Target:  perfv1.TargetSpec{Deployment: "app", URL: "http://app." + ns + ".svc:8080"},
			Load:    perfv1.LoadSpec{Requests: []perfv1.RequestSpec{{Path: "/", Weight: 1}}},
			Stages:  []perfv1.StageSpec{{QPS: 10}},
			Windows: perfv1.WindowsSpec{Baseline: "20s", Treatment: "20s", Settle: "0s"},
			Metrics: perfv1.MetricsSpec{Interval: "5s"},
			Toggle:  &toggle,
		},
	}
}

// TestCrashBetweenAnEffectAndItsStatusWrite kills the manager after each kind
// of effect, for http and exec (runtime) and env (template) toggles, restarts
// it, and checks exactly what the target went through.
func TestCrashBetweenAnEffectAndItsStatusWrite(t *testing.T) {
	for i, tc := range []struct {
		name, killAfter string
		kind            string // http, exec or env
		phase           perfv1.Phase
		reason          string
		// requests is what the one pod's admin endpoint must have received.
		requests []string
	}{
		{"http: after taking the lock", "AcquireLock:1", "http", perfv1.PhaseSucceeded, "", []string{"on", "off"}},
		{"http: after creating the baseline Job", "CreateJob:1", "http", perfv1.PhaseSucceeded, "", []string{"on", "off"}},
		// The pod switched on; the restarted operator sends "on" again, the pod
		// refuses (already on), and the run aborts: the pod recorded before the
		// send is still switched back.
		{"http: with the apply sent", "ApplyToggle:1", "http", perfv1.PhaseAborted, perfv1.ReasonToggleFailed, []string{"on", "on=409", "off"}},
		{"http: with the revert sent", "RevertToggle:1", "http", perfv1.PhaseSucceeded, "", []string{"on", "off", "off"}},
		// The revert and the release are one decision here (one stage, no
		// settle): its status write is lost with the process, so the restarted
		// operator decides the ending again and sends "off" once more.
		{"http: after releasing the lock", "ReleaseLock:1", "http", perfv1.PhaseSucceeded, "", []string{"on", "off", "off"}},
		{"exec: with the apply run", "ApplyToggle:1", "exec", perfv1.PhaseAborted, perfv1.ReasonToggleFailed, []string{"on", "on=409", "off"}},
		{"exec: with the revert run", "RevertToggle:1", "exec", perfv1.PhaseSucceeded, "", []string{"on", "off", "off"}},
		{"env: with the apply written", "ApplyToggle:1", "env", perfv1.PhaseSucceeded, "", nil},
		{"env: with the revert written", "RevertToggle:1", "env", perfv1.PhaseSucceeded, "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			run := newCrashRun(t, fmt.Sprintf("127.0.0.%d", 20+i))
			exp := run.killThenWait(t, experiment(run.ns, toggleOf(tc.kind)), tc.killAfter, 4*time.Minute)
			if exp.Status.Phase != tc.phase || (tc.reason != "" && (exp.Status.Abort == nil || exp.Status.Abort.Reason != tc.reason)) {
				t.Fatalf("ended %s %+v; want %s %s", exp.Status.Phase, exp.Status.Abort, tc.phase, tc.reason)
			}
			// An env toggle adds one apply and one revert to the template,
			// whatever the crash; its pod's admin endpoint gets nothing.
			var templateWrites int64
			if tc.kind == "env" {
				templateWrites = 2
			}
			run.assertClean(t, exp, tc.requests, templateWrites)
		})
	}
}

// crashRun is one crash case: its namespace, a one-replica target whose pod's
// admin endpoint is a real server, and the world playing its controllers.
type crashRun struct {
	ns     string
	pod    *admin
	before string // the target's template, byte for byte
	dep    *appsv1.Deployment
	w      *world
}

func newCrashRun(t *testing.T, ip string) *crashRun {
	t.Helper()
	r := &crashRun{ns: newNamespace(t)}
	r.pod = newAdmin(t, ip)
	target(t, r.ns, ip)
	r.before, r.dep = templateJSON(t, r.ns)
	r.w = startWorld(t, r.ns)
	return r
}

// killThenWait creates exp, runs a manager that sends itself SIGKILL after
// killAfter, restarts it, and waits for the run to end.
func (r *crashRun) killThenWait(t *testing.T, exp *perfv1.PerfExperiment, killAfter string, bound time.Duration) *perfv1.PerfExperiment {
	t.Helper()
	if err := k8s.Create(context.Background(), exp); err != nil {
		t.Fatal(err)
	}
	startOperator(t, r.ns, killAfter, 1).killedBySIGKILL(t)
	startOperator(t, r.ns, "", 2)
	return waitTerminalNamed(t, r.ns, exp.Name, bound)
}

// assertClean checks what every crash must leave: no toggle on in the status,
// the pod's admin endpoint off after exactly requests (nil: not a runtime
// toggle, not checked), the template byte for byte as before with none of the
// operator's annotations, the generation moved by the lock's two writes and
// templateWrites, and no Job created twice.
func (r *crashRun) assertClean(t *testing.T, exp *perfv1.PerfExperiment, requests []string, templateWrites int64) {
	t.Helper()
	if tg := exp.Status.Toggle; tg == nil || tg.Applied || len(tg.Pods) != 0 {
		t.Errorf("status.toggle at the end: %+v", tg)
	}
	if requests != nil {
		// The restarted operator may still be finishing its last request;
		// the admin log is complete once the lock is gone.
		time.Sleep(time.Second)
		isOn, got := r.pod.state()
		if isOn || !slices.Equal(got, requests) {
			t.Errorf("pod got %q (on now: %v); want %q", got, isOn, requests)
		}
	}
	after, depAfter := templateJSON(t, r.ns)
	if after != r.before {
		t.Errorf("template not restored byte for byte:\nbefore %s\nafter  %s", r.before, after)
	}
	for _, a := range []string{perfv1.AnnotationLock, perfv1.AnnotationOriginal, perfv1.AnnotationTemplateHash} {
		if _, ok := depAfter.Annotations[a]; ok {
			t.Errorf("annotation %s left on the target", a)
		}
	}
	// Taking and releasing the lock move the generation once each.
	if want := r.dep.Generation + 2 + templateWrites; depAfter.Generation != want {
		t.Errorf("target generation %d → %d; want %d", r.dep.Generation, depAfter.Generation, want)
	}
	r.w.mu.Lock()
	defer r.w.mu.Unlock()
	if len(r.w.dupes) > 0 {
		t.Errorf("Jobs created twice (new UID under the same name): %v", r.w.dupes)
	}
}

// httpVariants are two settings of one runtime feature ("on:a"/"off:a",
// "on:b"/"off:b"), bracketed by baselines: a's revert, the baseline after
// it, then b's apply.
func httpVariants() []perfv1.ArmSpec {
	var out []perfv1.ArmSpec
	for _, v := range []string{"a", "b"} {
		out = append(out, perfv1.ArmSpec{Name: v, Toggle: perfv1.ToggleSpec{HTTP: &perfv1.HTTPToggle{Port: adminPort, Timeout: "5s",
			HTTPRequest: perfv1.HTTPRequest{Path: "/admin/sampling", Body: "on:" + v},
			Revert:      perfv1.HTTPRequest{Path: "/admin/sampling", Body: "off:" + v}}}})
	}
	return out
}

// TestCrashBetweenVariants kills the manager right after the second runtime
// variant's apply, and after the first variant's revert: the restarted
// operator must send each variant's own switch-back (the intent it recorded
// names the variant, not only the pods), so no setting stays on.
func TestCrashBetweenVariants(t *testing.T) {
	for i, tc := range []struct {
		name, killAfter string
		phase           perfv1.Phase
		requests        []string
	}{
		// b's intent (pod and variant) was recorded before "on:b" was sent:
		// the restarted operator's apply is refused (b is on already), and
		// the abort sends b's switch-back, not a's.
		{"with the second variant's apply sent", "ApplyToggle:2", perfv1.PhaseAborted, []string{"on:a", "off:a", "on:b", "on:b=409", "off:b"}},
		// a's revert was sent but not recorded: it is sent again.
		{"with the first variant's revert sent", "RevertToggle:1", perfv1.PhaseSucceeded, []string{"on:a", "off:a", "off:a", "on:b", "off:b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			run := newCrashRun(t, fmt.Sprintf("127.0.0.%d", 60+i))
			e := experiment(run.ns, perfv1.ToggleSpec{})
			e.Spec.Toggle, e.Spec.Variants = nil, httpVariants()
			exp := run.killThenWait(t, e, tc.killAfter, 5*time.Minute)
			if exp.Status.Phase != tc.phase {
				t.Fatalf("ended %s %+v; want %s", exp.Status.Phase, exp.Status.Abort, tc.phase)
			}
			if tc.phase == perfv1.PhaseSucceeded && (len(exp.Status.Summary) != 2 || exp.Status.Summary[0].Variant != "a" || exp.Status.Summary[1].Variant != "b") {
				t.Errorf("summary %+v", exp.Status.Summary)
			}
			run.assertClean(t, exp, tc.requests, 0)
		})
	}
}
