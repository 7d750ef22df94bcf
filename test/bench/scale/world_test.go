package scale

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"perfexp.dev/perf-operator/internal/k6"
	"perfexp.dev/perf-operator/internal/testenv"
)

// memoryLimit is every target container's memory limit; the fake working set
// sits at 40 % of it, and at 97 % (above the 90 % guardrail) once breached.
const memoryLimit = 1 << 30

// targetIP is the loopback address that plays target i's pod: 127.1.0.1,
// 127.1.0.2, … (all of 127/8 is loopback on Linux).
func targetIP(i int) string {
	return fmt.Sprintf("127.1.%d.%d", i/250, i%250+1)
}

func targetName(i int) string { return fmt.Sprintf("app-%04d", i) }

// admin plays one target pod's admin endpoint for its http toggle. A hanging
// one reads the request and never answers, until the test ends.
type admin struct {
	srv      *http.Server
	ln       net.Listener
	hang     bool
	requests atomic.Int64
	inFlight atomic.Int64
	stop     chan struct{}
}

func newAdmin(ip string, hang bool) (*admin, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return nil, err
	}
	a := &admin{ln: ln, hang: hang, stop: make(chan struct{})}
	a.srv = &http.Server{Handler: http.HandlerFunc(a.serve), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = a.srv.Serve(ln) }()
	return a, nil
}

func (a *admin) port() int32 { return int32(a.ln.Addr().(*net.TCPAddr).Port) }

func (a *admin) serve(w http.ResponseWriter, r *http.Request) {
	_, _ = io.ReadAll(r.Body)
	a.requests.Add(1)
	if a.hang {
		a.inFlight.Add(1)
		defer a.inFlight.Add(-1)
		select {
		case <-r.Context().Done():
		case <-a.stop:
		}
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (a *admin) close() {
	close(a.stop)
	_ = a.srv.Close()
}

// fakeProm answers the Prometheus query API (POST or GET /api/v1/query) the
// way the operator's queries expect: one series per pod named in the query's
// pod=~"^(?:…)$" matcher, CPU 0.25 cores, working set 40 % of the limit, heap
// 200 MiB, each with ±0.5 % noise and no trend. breach makes one pod's working
// set 97 % of its limit from then on.
type fakeProm struct {
	srv     *http.Server
	ln      net.Listener
	queries atomic.Int64
	// probes are the source checks (vector(1)) and shared the queries naming
	// more than one pod (a shared fetch); the rest name one target's pods.
	probes, shared atomic.Int64
	mu             sync.Mutex
	breach         map[string]time.Time // pod → when its working set jumped
	n              atomic.Uint64
}

var (
	podMatcher = regexp.MustCompile(`pod=~"\^\(\?:([^)]*)\)\$"`)
)

func newFakeProm() (*fakeProm, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &fakeProm{ln: ln, breach: map[string]time.Time{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/api/v1/query", p.query)
	p.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

func (p *fakeProm) url() string { return "http://" + p.ln.Addr().String() }

func (p *fakeProm) close() { _ = p.srv.Close() }

// breachPod makes pod's working set jump now and returns the instant.
func (p *fakeProm) breachPod(pod string) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	p.breach[pod] = now
	return now
}

type promSample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

func (p *fakeProm) query(w http.ResponseWriter, r *http.Request) {
	p.queries.Add(1)
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	q := r.Form.Get("query")
	at := float64(time.Now().UnixMilli()) / 1000
	if ts, err := strconv.ParseFloat(r.Form.Get("time"), 64); err == nil {
		at = ts
	}
	var result []promSample
	if q == "vector(1)" {
		p.probes.Add(1)
		result = append(result, promSample{Metric: map[string]string{}, Value: [2]any{at, "1"}})
	} else if m := podMatcher.FindStringSubmatch(q); m != nil {
		if strings.Contains(m[1], "|") {
			p.shared.Add(1)
		}
		for _, pod := range strings.Split(m[1], "|") {
			pod = strings.ReplaceAll(pod, `\\`, "") // QuoteMeta's escapes, doubled in the string literal
			result = append(result, promSample{Metric: map[string]string{"pod": pod}, Value: [2]any{at, p.value(q, pod)}})
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"status": "success", "data": map[string]any{"resultType": "vector", "result": result}})
}

func (p *fakeProm) value(q, pod string) string {
	noise := 1 + (float64(p.n.Add(1)%11)-5)/1000 // ±0.5 %, no trend
	switch {
	case strings.Contains(q, "container_cpu_usage_seconds_total"):
		return strconv.FormatFloat(0.25*noise, 'f', 6, 64)
	case strings.Contains(q, "container_memory_working_set_bytes"):
		p.mu.Lock()
		_, breached := p.breach[pod]
		p.mu.Unlock()
		if breached {
			return strconv.FormatFloat(0.97*memoryLimit, 'f', 0, 64)
		}
		return strconv.FormatFloat(0.4*memoryLimit*noise, 'f', 0, 64)
	default:
		return strconv.FormatFloat(200<<20*noise, 'f', 0, 64)
	}
}

// createTarget creates target i: a one-replica Deployment, rolled out, and its
// pod Running and Ready at targetIP(i).
func createTarget(ctx context.Context, c client.Client, ns string, i int) error {
	name := targetName(i)
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
					Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
						corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: *resource.NewQuantity(memoryLimit, resource.BinarySI)}},
				}}},
			},
		},
	}
	if err := c.Create(ctx, dep); err != nil {
		return err
	}
	dep.Status = appsv1.DeploymentStatus{ObservedGeneration: dep.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}
	if err := c.Status().Update(ctx, dep); err != nil {
		return err
	}
	ip := targetIP(i)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name + "-0", Namespace: ns, Labels: labels}, Spec: *dep.Spec.Template.Spec.DeepCopy()}
	if err := c.Create(ctx, pod); err != nil {
		return err
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
		Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}}}}
	return c.Status().Update(ctx, pod)
}

// world plays the Deployment controller, the Job controller and the kubelet
// for one namespace on the real clock, reading from the test's own informer
// cache (so it adds writes, not polling, to the apiserver's load): a
// Deployment whose generation moved is rolled out at once; a k6 Job's pod is
// created Running at once and completed with a k6 summary when its window has
// elapsed.
type world struct {
	c     client.Client // writes
	cache cache.Cache   // reads
	ns    string
	stop  chan struct{}
	done  chan struct{}
}

func startWorld(c client.Client, cc cache.Cache, ns string) *world {
	w := &world{c: c, cache: cc, ns: ns, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(500 * time.Millisecond)
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
	return w
}

func (w *world) close() { close(w.stop); <-w.done }

func (w *world) tick() {
	ctx := context.Background()
	var deps appsv1.DeploymentList
	if err := w.cache.List(ctx, &deps, client.InNamespace(w.ns)); err == nil {
		for i := range deps.Items {
			d := deps.Items[i].DeepCopy()
			if d.Status.ObservedGeneration < d.Generation {
				n := *d.Spec.Replicas
				d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n}
				_ = w.c.Status().Update(ctx, d)
			}
		}
	}
	var jobs batchv1.JobList
	if err := w.cache.List(ctx, &jobs, client.InNamespace(w.ns)); err != nil {
		return
	}
	live := map[string]bool{}
	for i := range jobs.Items {
		j := &jobs.Items[i]
		live[j.Name] = true
		if j.DeletionTimestamp == nil && j.Status.CompletionTime == nil {
			w.runJob(j.DeepCopy())
		}
	}
	w.collectGarbage(ctx, live)
}

// collectGarbage plays the garbage collector: the operator deletes its Jobs
// with background propagation, and a cluster's garbage collector then deletes
// their pods within seconds. Without it the finished k6 pods would stay in the
// operator's pod cache for the whole run, a live heap no cluster gives it.
func (w *world) collectGarbage(ctx context.Context, liveJobs map[string]bool) {
	var pods corev1.PodList
	if err := w.cache.List(ctx, &pods, client.InNamespace(w.ns), client.HasLabels{batchv1.JobNameLabel}); err != nil {
		return
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp == nil && !liveJobs[p.Labels[batchv1.JobNameLabel]] {
			_ = w.c.Delete(ctx, p, client.Preconditions{UID: &p.UID})
		}
	}
}

func (w *world) runJob(job *batchv1.Job) {
	ctx := context.Background()
	pod := &corev1.Pod{}
	key := client.ObjectKey{Namespace: w.ns, Name: job.Name + "-0"}
	if err := w.cache.Get(ctx, key, pod); err != nil {
		pod = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: w.ns, Labels: map[string]string{}}, Spec: *job.Spec.Template.Spec.DeepCopy()}
		for k, v := range job.Spec.Template.Labels {
			pod.Labels[k] = v
		}
		pod.Labels[batchv1.JobNameLabel] = job.Name
		if err := w.c.Create(ctx, pod); err != nil {
			return // AlreadyExists: the cache has not seen it yet
		}
		pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
			Name: k6.ContainerName, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}}}}
		_ = w.c.Status().Update(ctx, pod)
		return
	}
	pod = pod.DeepCopy()
	if len(pod.Status.ContainerStatuses) == 0 {
		return
	}
	cs := &pod.Status.ContainerStatuses[0]
	if cs.State.Terminated != nil {
		w.completeJob(ctx, job, cs.State.Terminated.StartedAt, cs.State.Terminated.FinishedAt)
		return
	}
	if cs.State.Running == nil {
		return
	}
	started := cs.State.Running.StartedAt
	qps, dur := testenv.K6Window(job)
	if time.Now().Before(started.Add(dur)) {
		return
	}
	end := metav1.NewTime(started.Add(dur))
	msg := testenv.K6Result(job.Name, qps, dur, started.Time)
	pod.Status.Phase = corev1.PodSucceeded
	cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{StartedAt: started, FinishedAt: end, Message: msg, Reason: "Completed"}}
	if err := w.c.Status().Update(ctx, pod); err != nil {
		return
	}
	w.completeJob(ctx, job, started, end)
}

func (w *world) completeJob(ctx context.Context, job *batchv1.Job, started, end metav1.Time) {
	testenv.CompleteJob(job, started, end)
	_ = w.c.Status().Update(ctx, job)
}
