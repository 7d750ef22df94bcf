package engine

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
	"perfexp.dev/perf-operator/internal/k6"
	"perfexp.dev/perf-operator/internal/metrics"
)

// world simulates everything around the engine: the Job controller and kubelet
// (Jobs start after podStart and finish after their window), the Deployment
// controller (a toggle change rolls out after rollout), and the reconciler, which
// runs the actions and persists the status only when all of them succeeded.
type world struct {
	t   *testing.T
	now time.Time
	exp *perfv1.PerfExperiment

	targetExists bool
	heldBy       string
	// changed is what someone else changed on the target (Target.Changed).
	changed string
	applied bool // whether the toggle is in effect on the target
	// active is the toggle in effect (spec.toggle or a variant's) while
	// applied; cpuOf, when set, is each pod's CPU with it on (0.42 otherwise).
	active *perfv1.ToggleSpec
	cpuOf  func(t *perfv1.ToggleSpec) float64
	// drift, when set, scales every pod's CPU at a time (a service whose
	// load or neighbours change slowly).
	drift func(t time.Time) float64
	// gcOf, when set, is each pod's time in GC (seconds per second) with the
	// given toggle on, nil for none; without it the pods export no GC timing.
	gcOf         func(t *perfv1.ToggleSpec) float64
	generation   int64
	observedGen  int64
	rolloutAt    time.Time // when the current generation finishes rolling out
	rolloutStuck bool

	jobs     map[string]*simJob
	created  map[string]int // Job creations per name
	finished map[string]bool

	podStart, rollout time.Duration
	results           func(w k6.Window) *k6.PodResult
	// heap is each pod's heap at a time (the guardrails watch it).
	heap func(t time.Time) float64
	// workingSet, when set, is each pod's working set at a time (1.5 GiB of
	// the 4 GiB limit otherwise).
	workingSet       func(t time.Time) float64
	toggleError      string
	decisions        int
	finalizerRemoved bool
	applies, reverts int
	// toggleActions counts every apply and revert action asked for, effective
	// or not.
	toggleActions int
	// loseStatusAt drops the status write of that decision (a crash between the
	// actions and the write).
	loseStatusAt int
	// cpuWindow, when set, is the period each sample's CPU averages over (as
	// metrics-server's window or a rate's range); a sample whose period saw a
	// k6 pod start reads cpuSpike, the load before and after mixed.
	cpuWindow time.Duration
	// fetchEvery, when set, is the cadence of the shared metrics fetch
	// (controllers/metrics_shared.go): samples exist only at fetchPhase + k ×
	// fetchEvery from the world's start, whatever the windows' starts, as for
	// an experiment that shares its namespace's fetch; a little more than the
	// interval is a fetch that comes late each time.
	fetchEvery, fetchPhase time.Duration
	start                  time.Time
	// metricsFault, when set, may change what the metrics source answers at
	// each sample (nil and a message: the query failed). The reconciler then
	// completes the answer against the ready pods, as it does in production.
	metricsFault func(w *world, got []metrics.Sample) ([]metrics.Sample, string)
	// live, when set, gives a running load Job's k6 counters after it ran for
	// elapsed (ok false: its API did not answer); the reconciler reads them
	// with every sample and passes the previous reading along.
	live     func(w *world, win k6.Window, elapsed time.Duration) (k6.Live, bool)
	liveSeen map[string][]LiveLoad
}

const cpuSpike = 9.9

type simJob struct {
	window  k6.Window
	created time.Time
}

func newWorld(t *testing.T, exp *perfv1.PerfExperiment) *world {
	exp.Default()
	return &world{
		t: t, now: time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC), start: time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC), exp: exp,
		targetExists: true, generation: 1, observedGen: 1,
		jobs: map[string]*simJob{}, created: map[string]int{}, finished: map[string]bool{},
		podStart: 3 * time.Second, rollout: 40 * time.Second,
		heap: func(time.Time) float64 { return 800 << 20 },
		results: func(w k6.Window) *k6.PodResult {
			n := int64(float64(w.QPS) * w.Duration.Seconds())
			return &k6.PodResult{Requests: n, P50Ms: 2, P95Ms: 5, P99Ms: 9, MaxMs: 20, DurationSeconds: w.Duration.Seconds()}
		},
	}
}

// fetched says whether the metrics source has an answer at w.now: always,
// unless samples come from a shared fetch's cadence (fetchEvery).
func (w *world) fetched() bool {
	if w.fetchEvery <= 0 {
		return true
	}
	d := w.now.Sub(w.start) - w.fetchPhase
	return d >= 0 && d%w.fetchEvery == 0
}

// fetchAtOrAfter is the shared fetch's first time at or after t.
func (w *world) fetchAtOrAfter(t time.Time) time.Time {
	d := t.Sub(w.start) - w.fetchPhase
	if d <= 0 {
		return w.start.Add(w.fetchPhase)
	}
	k := (d + w.fetchEvery - 1) / w.fetchEvery
	return w.start.Add(w.fetchPhase + k*w.fetchEvery)
}

func (w *world) observe() Observed {
	o := Observed{Now: w.now, Jobs: map[string]*Job{}, ToggleError: w.toggleError}
	if SampleDue(w.exp, time.Time{}, w.now) && w.fetched() {
		o.LastPendingSample = w.now
		for _, pod := range []string{"app-1", "app-2"} {
			cpu := 0.4
			if w.applied {
				cpu = 0.42
				if w.cpuOf != nil {
					cpu = w.cpuOf(w.active)
				}
			}
			if w.drift != nil {
				cpu *= w.drift(w.now)
			}
			if w.loadChangedWithin(w.cpuWindow) {
				cpu = cpuSpike
			}
			ws := 1.5 * (1 << 30)
			if w.workingSet != nil {
				ws = w.workingSet(w.now)
			}
			gc := math.NaN()
			if w.gcOf != nil {
				var on *perfv1.ToggleSpec
				if w.applied {
					on = w.active
				}
				gc = w.gcOf(on)
			}
			o.Samples = append(o.Samples, metrics.Sample{Time: w.now, Window: w.cpuWindow, Pod: pod, CPUCores: cpu,
				WorkingSetBytes: ws, HeapBytes: w.heap(w.now), GCSecondsPerSecond: gc})
		}
		if w.metricsFault != nil {
			got, failure := w.metricsFault(w, o.Samples)
			o.Samples = nil
			if failure != "" {
				o.SampleFailures = []SampleFailure{{Time: w.now, Message: failure}}
			} else {
				o.Samples = metrics.Expect(got, []string{"app-1", "app-2"})
			}
		}
	}
	if w.live != nil && o.LastPendingSample.Equal(w.now) {
		o.Live = w.readLive()
	}
	o.Deleting = w.exp.DeletionTimestamp != nil
	if w.targetExists {
		done := !w.rolloutStuck && !w.now.Before(w.rolloutAt)
		if done {
			w.observedGen = w.generation
		}
		o.Target = &Target{HeldBy: w.heldBy, Changed: w.changed, Original: `{"kind":"test"}`, Replicas: 2, CPULimitCores: 2, MemoryLimitBytes: 4 << 30,
			Rollout: Rollout{ObservedGeneration: w.observedGen, Complete: done, Message: "1 of 2 updated replicas available"}}
	}
	for name, j := range w.jobs {
		job := &Job{Name: name}
		start := j.created.Add(w.podStart)
		if !w.now.Before(start) {
			job.Started = &start
		}
		end := start.Add(j.window.Duration)
		if !w.now.Before(end) && j.window.Variant != perfv1.VariantSettle {
			job.Complete, job.Finished = true, &end
			if r := w.results(j.window); r != nil {
				job.Results = []*k6.PodResult{r}
			} else {
				job.ResultErrors = []string{"pod " + name + "-0: the k6 termination message is empty"}
			}
		}
		o.Jobs[name] = job
	}
	return o
}

// readLive reads every running load Job's counters, with each one's previous
// reading (observe may run twice at one time: the earlier readings count).
func (w *world) readLive() []LiveLoad {
	if w.liveSeen == nil {
		w.liveSeen = map[string][]LiveLoad{}
	}
	var out []LiveLoad
	for name, j := range w.jobs {
		start := j.created.Add(w.podStart)
		if w.now.Before(start) || !w.now.Before(start.Add(j.window.Duration)) {
			continue
		}
		c, ok := w.live(w, j.window, w.now.Sub(start))
		if !ok {
			continue
		}
		l := LiveLoad{Job: name, Pod: name + "-0", At: w.now, Counts: c}
		seen := w.liveSeen[name]
		for i := len(seen) - 1; i >= 0; i-- {
			if seen[i].At.Before(w.now) {
				l.PrevAt, l.Prev = seen[i].At, seen[i].Counts
				break
			}
		}
		if n := len(seen); n == 0 || seen[n-1].At.Before(w.now) {
			w.liveSeen[name] = append(seen, l)
		}
		out = append(out, l)
	}
	sort.Slice(out, func(i, k int) bool { return out[i].Job < out[k].Job })
	return out
}

// loadChangedWithin says whether a k6 pod started in (now−d, now].
func (w *world) loadChangedWithin(d time.Duration) bool {
	for _, j := range w.jobs {
		start := j.created.Add(w.podStart)
		if d > 0 && !start.After(w.now) && w.now.Sub(start) < d {
			return true
		}
	}
	return false
}

// step runs one reconcile and returns its decision.
func (w *world) step() Decision {
	w.decisions++
	if w.decisions > 2000 {
		w.t.Fatalf("no end after 2000 decisions: phase %s", w.exp.Status.Phase)
	}
	d := Decide(w.exp, w.observe())
	self := w.exp.Namespace + "/" + w.exp.Name
	for _, a := range d.Actions {
		switch a.Kind {
		case ActionAcquireLock:
			if w.heldBy != "" && w.heldBy != self {
				w.t.Fatalf("took a lock held by %s", w.heldBy)
			}
			w.heldBy = self
		case ActionApplyToggle, ActionRevertToggle:
			w.toggleActions++
			want := a.Kind == ActionApplyToggle
			if a.Toggle == nil {
				w.t.Fatalf("%s without the toggle to run", a.Kind)
			}
			if w.applied && a.Toggle != w.active {
				// A variant applied over another would leave both changes'
				// effects mixed; a runtime revert must send the applied one's
				// switch-back.
				w.t.Fatalf("%s of %+v while %+v is on", a.Kind, *a.Toggle, *w.active)
			}
			w.active = a.Toggle
			if want && !a.Toggle.RollsPods() && w.exp.Status.Toggle != nil && d.Status.Toggle != nil {
				// The reconciler persists a runtime apply's intent (its pods
				// and variant) before sending, whatever happens to the
				// decision's own status write.
				w.exp.Status.Toggle.Variant = d.Status.Toggle.Variant
			}
			if w.applied != want { // the reconciler's toggle is idempotent
				w.applied = want
				w.generation++
				w.rolloutAt = w.now.Add(w.rollout)
				if want {
					w.applies++
				} else {
					w.reverts++
				}
			}
			if w.exp.Spec.Switch().RollsPods() && d.Status.Toggle != nil {
				d.Status.Toggle.TargetGeneration = w.generation
			}
		case ActionCreateJob:
			if w.finished[a.JobName] {
				w.t.Fatalf("window of Job %s run twice", a.JobName)
			}
			if _, ok := w.jobs[a.JobName]; !ok {
				w.jobs[a.JobName] = &simJob{window: a.Window, created: w.now}
				w.created[a.JobName]++
			}
		case ActionDeleteJob:
			if o := w.observe().Jobs[a.JobName]; o != nil && o.Complete {
				w.finished[a.JobName] = true
			}
			delete(w.jobs, a.JobName)
		case ActionReleaseLock:
			if w.heldBy == self {
				w.heldBy = ""
			}
		case ActionRemoveFinalizer:
			w.finalizerRemoved = true
		}
	}
	if w.decisions != w.loseStatusAt {
		w.exp.Status = d.Status
	}
	return d
}

// advance moves the clock to the next moment anything can happen: the decision's
// wake-up or the next simulated event (a pod starts, a Job ends, a rollout
// completes), whichever comes first — exactly what a real reconciler sees.
func (w *world) advance(d Decision) bool {
	var next []time.Time
	// With a shared fetch an overdue sample waits for it: the engine's
	// immediate requeue for it (1ms) finds no answer before the fetch.
	if d.RequeueAfter > 0 && (w.fetchEvery == 0 || d.RequeueAfter >= time.Second) {
		next = append(next, w.now.Add(d.RequeueAfter))
	}
	if due, ok := NextSample(w.exp, time.Time{}); ok && w.fetchEvery > 0 {
		// The next sample comes with the shared fetch after it is due.
		if !due.After(w.now) {
			due = w.now.Add(time.Nanosecond)
		}
		next = append(next, w.fetchAtOrAfter(due))
	}
	if w.decisions == w.loseStatusAt {
		// The status write was lost to a crash: the restarted operator
		// reconciles every experiment when its caches have synced.
		next = append(next, w.now.Add(time.Second))
	}
	for _, j := range w.jobs {
		s := j.created.Add(w.podStart)
		next = append(next, s, s.Add(j.window.Duration))
	}
	if !w.rolloutStuck {
		next = append(next, w.rolloutAt)
	}
	sort.Slice(next, func(i, k int) bool { return next[i].Before(next[k]) })
	for _, t := range next {
		if t.After(w.now) {
			w.now = t
			return true
		}
	}
	return false
}

// runToEnd reconciles until a terminal phase, failing if the engine idles with
// nothing to wake it.
func (w *world) runToEnd() {
	for !w.exp.Status.Phase.IsTerminal() {
		d := w.step()
		if d.Stall != nil {
			w.t.Fatalf("stalled: %+v", d.Stall)
		}
		if w.exp.Status.Phase.IsTerminal() {
			break
		}
		if !w.advance(d) {
			w.t.Fatalf("engine idles in phase %s with no wake-up (waiting: %s)", w.exp.Status.Phase, d.Waiting)
		}
	}
	w.step() // housekeeping after the terminal write
}

func seedExperiment() *perfv1.PerfExperiment {
	return &perfv1.PerfExperiment{
		ObjectMeta: metav1.ObjectMeta{Name: "profiling-overhead", Namespace: "shop"},
		Spec: perfv1.PerfExperimentSpec{
			Target:  perfv1.TargetSpec{Deployment: "mall-gateway", URL: "http://mall-gateway.shop.svc:8080"},
			Load:    perfv1.LoadSpec{Requests: []perfv1.RequestSpec{{Path: "/mysql", Weight: 50}, {Path: "/redis", Weight: 50}}},
			Warmup:  &perfv1.WarmupSpec{QPS: 50, Duration: "5m"},
			Stages:  []perfv1.StageSpec{{QPS: 500}, {QPS: 1000}, {QPS: 2000}},
			Metrics: perfv1.MetricsSpec{Interval: "1m"},
			Toggle: &perfv1.ToggleSpec{HTTP: &perfv1.HTTPToggle{
				HTTPRequest: perfv1.HTTPRequest{Path: "/admin/profiling", Body: "on"}, Port: 8081,
				Revert: perfv1.HTTPRequest{Path: "/admin/profiling", Body: "off"}}},
		},
	}
}

func envExperiment() *perfv1.PerfExperiment {
	e := seedExperiment()
	v := "on"
	e.Spec.Toggle = &perfv1.ToggleSpec{Env: &perfv1.EnvToggle{Name: "PROFILING", Value: &v}}
	return e
}

// windowsSummary prints the windows as "stage/variant" for comparison.
func windowsSummary(ws []perfv1.WindowStatus) string {
	var parts []string
	for _, w := range ws {
		parts = append(parts, fmt.Sprintf("%d/%s", w.Stage, w.Variant))
	}
	return strings.Join(parts, " ")
}
