//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
	"perfexp.dev/perf-operator/internal/testenv"
)

// localDocs reads a multi-document manifest under examples/local, moved from
// namespace perf-demo to ns.
func localDocs(t *testing.T, file, ns string) []*unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "examples", "local", file))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(b), "perf-demo", ns)
	var out []*unstructured.Unstructured
	for _, doc := range strings.Split(text, "\n---\n") {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if len(m) > 0 {
			out = append(out, &unstructured.Unstructured{Object: m})
		}
	}
	return out
}

// app is a sample target: the examples/local file that defines it and its
// Deployment's name (also its pods' app label).
type app struct{ file, name string }

var (
	toy    = app{"toy.yaml", "toy"}
	jvmApp = app{"jvm.yaml", "jvmapp"}
)

// deploy creates a sample app in a fresh namespace and waits until both
// replicas are available.
func deploy(t *testing.T, ns string, a app) {
	t.Helper()
	c := t.Context()
	clearLeftover(t, ns)
	for _, u := range localDocs(t, a.file, ns) {
		if err := k8s.Create(c, u); err != nil {
			t.Fatalf("creating %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
	t.Cleanup(func() {
		if t.Failed() {
			dumpNamespace(t, ns)
		}
		// t.Context() is done by now; the client's timeout bounds the call.
		_ = k8s.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})
	eventually(t, 3*time.Minute, a.name+" available", func() (bool, string) {
		var d appsv1.Deployment
		if err := k8s.Get(c, client.ObjectKey{Namespace: ns, Name: a.name}, &d); err != nil {
			return false, err.Error()
		}
		return d.Status.AvailableReplicas == 2 && d.Status.UpdatedReplicas == 2,
			fmt.Sprintf("%d/%d available", d.Status.AvailableReplicas, *d.Spec.Replicas)
	})
}

// clearLeftover deletes ns if an earlier, interrupted run left it (the local
// cluster keeps its state across hack/cluster.sh down and up), and waits until
// it is gone, so every test starts from nothing.
func clearLeftover(t *testing.T, ns string) {
	t.Helper()
	obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	if err := k8s.Delete(t.Context(), obj); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	} else if err != nil {
		return
	}
	t.Logf("namespace %s was left by an earlier run; deleting it", ns)
	eventually(t, 3*time.Minute, "the leftover namespace to be gone", func() (bool, string) {
		err := k8s.Get(t.Context(), client.ObjectKey{Name: ns}, obj)
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		return false, string(obj.Status.Phase)
	})
}

// experiment reads a local example into ns and lets the test shorten it.
func experiment(t *testing.T, file, ns string, edit func(*perfv1.PerfExperiment)) *perfv1.PerfExperiment {
	t.Helper()
	docs := localDocs(t, file, ns)
	if len(docs) != 1 {
		t.Fatalf("%s: %d documents", file, len(docs))
	}
	var exp perfv1.PerfExperiment
	raw, _ := json.Marshal(docs[0].Object)
	if err := json.Unmarshal(raw, &exp); err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(&exp)
	}
	return &exp
}

// eventually polls cond every 2 s until it holds or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		ok, state := cond()
		if ok {
			return
		}
		if state != last {
			t.Logf("waiting for %s: %s", what, state)
			last = state
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not reached in %s; last: %s", what, timeout, state)
		}
		time.Sleep(2 * time.Second)
	}
}

// runUntil follows an experiment, logging each phase with its time since
// creation, until stop holds; it returns the experiment as it then was.
func runUntil(t *testing.T, key client.ObjectKey, timeout time.Duration, what string, stop func(*perfv1.PerfExperiment) bool) *perfv1.PerfExperiment {
	t.Helper()
	start := time.Now()
	var exp perfv1.PerfExperiment
	var phase perfv1.Phase
	var since time.Duration
	eventually(t, timeout, what, func() (bool, string) {
		if err := k8s.Get(t.Context(), key, &exp); err != nil {
			return false, err.Error()
		}
		if exp.Status.Phase != phase {
			phase, since = exp.Status.Phase, time.Since(start).Round(time.Second)
		}
		return stop(&exp), fmt.Sprintf("%s %s (since %s)", exp.Status.Phase, exp.Status.CurrentStage, since)
	})
	return &exp
}

func terminal(e *perfv1.PerfExperiment) bool { return e.Status.Phase.IsTerminal() }

// templateJSON is the target's pod template, to compare before and after.
func templateJSON(t *testing.T, ns string, a app) string {
	t.Helper()
	var d appsv1.Deployment
	if err := k8s.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: a.name}, &d); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(d.Spec.Template)
	return string(b)
}

// assertTargetRestored checks the target Deployment is as before the
// experiment: the same pod template byte for byte, no lock or record
// annotations, no label.
func assertTargetRestored(t *testing.T, ns string, a app, before string) {
	t.Helper()
	eventually(t, time.Minute, "target restored", func() (bool, string) {
		var d appsv1.Deployment
		if err := k8s.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: a.name}, &d); err != nil {
			return false, err.Error()
		}
		b, _ := json.Marshal(d.Spec.Template)
		if string(b) != before {
			return false, "pod template differs:\n" + string(b)
		}
		for _, k := range []string{perfv1.AnnotationLock, perfv1.AnnotationOriginal} {
			if _, ok := d.Annotations[k]; ok {
				return false, "annotation " + k + " left"
			}
		}
		if _, ok := d.Labels[perfv1.LabelExperiment]; ok {
			return false, "label " + perfv1.LabelExperiment + " left"
		}
		return true, ""
	})
}

// assertNoJobs checks that no k6 Job or pod of the experiment is left.
func assertNoJobs(t *testing.T, ns string) {
	t.Helper()
	eventually(t, time.Minute, "k6 Jobs removed", func() (bool, string) {
		var jobs batchv1.JobList
		if err := k8s.List(t.Context(), &jobs, client.InNamespace(ns), client.HasLabels{perfv1.LabelExperiment}); err != nil {
			return false, err.Error()
		}
		return len(jobs.Items) == 0, fmt.Sprintf("%d Jobs", len(jobs.Items))
	})
}

// podsOf are the target's running pods.
func podsOf(t *testing.T, ns string, a app) []corev1.Pod {
	t.Helper()
	var pods corev1.PodList
	if err := k8s.List(t.Context(), &pods, client.InNamespace(ns), client.MatchingLabels{"app": a.name}); err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			out = append(out, p)
		}
	}
	return out
}

// switchState asks a sample app pod's admin endpoint for a switch's state ("on" or
// "off"). The node's host reaches pod IPs over the cluster bridge.
func switchState(t *testing.T, pod corev1.Pod, name string) string {
	t.Helper()
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(fmt.Sprintf("http://%s:8081/admin/%s", pod.Status.PodIP, name))
	if err != nil {
		t.Fatalf("pod %s admin: %v", pod.Name, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	s := strings.TrimSpace(string(b))
	if resp.StatusCode != http.StatusOK || (s != "on" && s != "off") {
		t.Fatalf("pod %s: admin answered %s %q", pod.Name, resp.Status, s)
	}
	return s
}

// assertNoRestarts checks no target container restarted or was OOM-killed.
func assertNoRestarts(t *testing.T, ns string, a app) {
	t.Helper()
	for _, p := range podsOf(t, ns, a) {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.RestartCount > 0 {
				reason := ""
				if cs.LastTerminationState.Terminated != nil {
					reason = cs.LastTerminationState.Terminated.Reason
				}
				t.Errorf("pod %s container %s restarted %d times (last: %s)", p.Name, cs.Name, cs.RestartCount, reason)
			}
		}
	}
}

// assertSpiralStopped follows a death-spiral experiment (memory tracking
// switched on under load) to its end and checks the guardrail stopped it in
// time: aborted by HeapGrowth or MemoryLimit, the peak working set per pod well
// below the 512 MiB limit of examples/local (the series sum both replicas), no
// restart, the switch off in every pod, the target restored, no Job left. It
// returns the ended experiment.
func assertSpiralStopped(t *testing.T, ns string, a app, before string, exp *perfv1.PerfExperiment) *perfv1.PerfExperiment {
	t.Helper()
	done := runUntil(t, client.ObjectKeyFromObject(exp), 20*time.Minute, "the guardrail to abort", terminal)
	if done.Status.Phase != perfv1.PhaseAborted || done.Status.Abort == nil {
		t.Fatalf("phase %s, abort %+v; want Aborted by a heap guardrail", done.Status.Phase, done.Status.Abort)
	}
	ab := done.Status.Abort
	if ab.Reason != perfv1.ReasonHeapGrowth && ab.Reason != perfv1.ReasonMemoryLimit {
		t.Fatalf("aborted for %s (%s); want HeapGrowth or MemoryLimit", ab.Reason, ab.Message)
	}
	if done.Status.Toggle == nil || done.Status.Toggle.AppliedAt == nil {
		t.Fatal("no toggle time in status")
	}
	const limit, replicas = 512 << 20, 2
	var peak int64
	for _, w := range done.Status.Windows {
		if w.Series == nil {
			continue
		}
		v, err := w.Series.Values()
		if err != nil {
			t.Fatalf("window %d/%s: %v", w.Stage, w.Variant, err)
		}
		for _, m := range v.MemoryBytes {
			peak = max(peak, m/replicas)
		}
	}
	t.Logf("abort %s after the toggle: %s — %s; peak memory per pod %.0f MiB of the %d MiB limit (%.0f %%)",
		ab.At.Sub(done.Status.Toggle.AppliedAt.Time).Round(time.Second), ab.Reason, ab.Message,
		float64(peak)/(1<<20), limit>>20, 100*float64(peak)/limit)
	if peak >= limit*2/3 {
		t.Errorf("peak memory %d MiB is not well below the %d MiB limit", peak>>20, limit>>20)
	}
	assertNoRestarts(t, ns, a)
	for _, p := range podsOf(t, ns, a) {
		if s := switchState(t, p, "memory-tracking"); s != "off" {
			t.Errorf("pod %s: memory tracking %s after the abort", p.Name, s)
		}
	}
	assertTargetRestored(t, ns, a, before)
	assertNoJobs(t, ns)
	return done
}

// dumpNamespace logs what a failed test left, for the CI log: experiment
// status, events (with counts), then workloads and pods last, so that a
// truncated log still shows why a pod was not ready, followed by the
// cluster's own error lines about the namespace.
func dumpNamespace(t *testing.T, ns string) {
	c := context.Background()
	var exps perfv1.PerfExperimentList
	if err := k8s.List(c, &exps, client.InNamespace(ns)); err == nil {
		for _, e := range exps.Items {
			b, _ := yaml.Marshal(e.Status)
			t.Logf("experiment %s status:\n%s", e.Name, b)
		}
	}
	var events corev1.EventList
	if err := k8s.List(c, &events, client.InNamespace(ns)); err == nil {
		for _, e := range events.Items {
			t.Logf("event %s %s %s/%s: %s ×%d %s", e.LastTimestamp.UTC().Format(time.TimeOnly), e.Type,
				e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, max(e.Count, 1), e.Message)
		}
	}
	var rss appsv1.ReplicaSetList
	if err := k8s.List(c, &rss, client.InNamespace(ns)); err == nil {
		for _, r := range rss.Items {
			t.Logf("replicaset %s: replicas %d ready %d available %d observedGeneration %d/%d",
				r.Name, r.Status.Replicas, r.Status.ReadyReplicas, r.Status.AvailableReplicas, r.Status.ObservedGeneration, r.Generation)
		}
	}
	var deps appsv1.DeploymentList
	if err := k8s.List(c, &deps, client.InNamespace(ns)); err == nil {
		for _, d := range deps.Items {
			t.Logf("deployment %s: updated %d ready %d available %d observedGeneration %d/%d",
				d.Name, d.Status.UpdatedReplicas, d.Status.ReadyReplicas, d.Status.AvailableReplicas, d.Status.ObservedGeneration, d.Generation)
			for _, cond := range d.Status.Conditions {
				t.Logf("  condition %s=%s %s: %s (updated %s)", cond.Type, cond.Status, cond.Reason, cond.Message, cond.LastUpdateTime.UTC().Format(time.TimeOnly))
			}
		}
	}
	var pods corev1.PodList
	if err := k8s.List(c, &pods, client.InNamespace(ns)); err == nil {
		for _, p := range pods.Items {
			t.Logf("pod %s: %s on %q ip %s", p.Name, p.Status.Phase, p.Spec.NodeName, p.Status.PodIP)
			for _, cond := range p.Status.Conditions {
				t.Logf("  condition %s=%s %s (since %s)", cond.Type, cond.Status, cond.Reason, cond.LastTransitionTime.UTC().Format(time.TimeOnly))
			}
			for _, cs := range p.Status.ContainerStatuses {
				t.Logf("  container %s: ready %t restarts %d state %s", cs.Name, cs.Ready, cs.RestartCount, containerState(cs.State))
			}
		}
	}
	for _, component := range []string{"kube-controller-manager", "kubelet"} {
		for _, line := range errorLines(component, ns, 15) {
			t.Logf("%s: %s", component, line)
		}
	}
	// CI shows a failed test's last lines: the experiments' outcome goes
	// there too, in a line each, after the pods.
	for _, e := range exps.Items {
		t.Logf("experiment %s: %s", e.Name, outcomeLine(&e))
	}
}

// outcomeLine is an experiment's ending in one line: its phase, abort, verdict
// and each stage's CPU overhead with its interval, and its windows' validity
// and CPU samples (millicores), for a log that keeps only a test's last lines.
func outcomeLine(e *perfv1.PerfExperiment) string {
	var b strings.Builder
	fmt.Fprintf(&b, "phase %s verdict %s", e.Status.Phase, e.Status.Verdict)
	if a := e.Status.Abort; a != nil {
		fmt.Fprintf(&b, " abort %s (%s)", a.Reason, a.Message)
	}
	for _, row := range e.Status.Summary {
		if c := row.CPU; c != nil {
			fmt.Fprintf(&b, "; stage %s CPU %s significant %t", row.Stage, describeRow(c), c.Significant)
		}
	}
	for _, w := range e.Status.Windows {
		valid := "unjudged"
		if w.Valid != nil && *w.Valid {
			valid = "valid"
		} else if w.Valid != nil {
			valid = "invalid: " + strings.Join(w.Invalid, ", ")
		}
		fmt.Fprintf(&b, "; window %d/%s %s", w.Stage, w.Variant, valid)
		if w.Series != nil {
			if v, err := w.Series.Values(); err == nil {
				fmt.Fprintf(&b, " cpu %v", v.CPUMillicores)
			}
		}
	}
	return b.String()
}

func containerState(s corev1.ContainerState) string {
	switch {
	case s.Running != nil:
		return "running since " + s.Running.StartedAt.UTC().Format(time.TimeOnly)
	case s.Waiting != nil:
		return "waiting: " + s.Waiting.Reason + " " + s.Waiting.Message
	case s.Terminated != nil:
		return fmt.Sprintf("terminated: %s exit %d", s.Terminated.Reason, s.Terminated.ExitCode)
	}
	return "unknown"
}

// errorLines is the last n error or warning lines that name ns in a local
// cluster component's log (hack/cluster.sh keeps them in .state/cluster/logs);
// none when the suite runs against another cluster.
func errorLines(component, ns string, n int) []string {
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), ".state", "cluster", "logs", component+".log"))
	if err != nil {
		return nil
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if (strings.HasPrefix(l, "E") || strings.HasPrefix(l, "W")) && strings.Contains(l, ns) {
			out = append(out, l[:min(len(l), 400)])
		}
	}
	return out[max(0, len(out)-n):]
}

// createExperiment creates an experiment, retrying while the API server's
// admission answers 503: the chart's requester policy (a
// MutatingAdmissionPolicy) resolves the PerfExperiment kind only once its
// periodically refreshed discovery has seen the CRD, shortly after install.
func createExperiment(t *testing.T, exp *perfv1.PerfExperiment) error {
	t.Helper()
	var err error
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(time.Second) {
		if err = k8s.Create(t.Context(), exp); !apierrors.IsServiceUnavailable(err) || time.Now().After(deadline) {
			return err
		}
	}
}
