package controllers_test

import (
	"context"
	"fmt"
	"io"
	"reflect"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	utilexec "k8s.io/client-go/util/exec"
	"sigs.k8s.io/controller-runtime/pkg/client"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
	"perfexp.dev/perf-operator/internal/toggle"
)

// podExec plays pods/exec for the fake target pods: it records each command
// with the pod, container and namespace it was sent to, and fails the "on"
// command in the pod named refuse with exit status 1.
type podExec struct {
	refuse string
	mu     sync.Mutex
	calls  map[string][]string // by pod: "namespace/container: command"
}

func (p *podExec) Exec(_ context.Context, namespace, pod, container string, command []string, _, stderr io.Writer) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.calls == nil {
		p.calls = map[string][]string{}
	}
	line := strings.Join(command, " ")
	p.calls[pod] = append(p.calls[pod], fmt.Sprintf("%s/%s: %s", namespace, container, line))
	if pod == p.refuse && strings.Contains(line, "JFR.start") {
		_, _ = io.WriteString(stderr, "Could not start recording: already running\n")
		return utilexec.CodeExitError{Err: fmt.Errorf("command terminated with exit code 1"), Code: 1}
	}
	return nil
}

func (p *podExec) of(pod string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.calls[pod]...)
}

func execToggleSpec() perfv1.ToggleSpec {
	return perfv1.ToggleSpec{Exec: &perfv1.ExecToggle{
		Command: []string{"jcmd", "1", "JFR.start", "name=perfexp"},
		Revert:  []string{"jcmd", "1", "JFR.stop", "name=perfexp"},
		Timeout: "10s",
	}}
}

func newExecDriver(t *testing.T, refuse string) (*driver, *podExec) {
	pe := &podExec{refuse: refuse}
	return newDriverWith(t, newTestClock(), runtimeToggles{exec: toggle.Execer{Executor: pe}}), pe
}

// An exec toggle runs its command in the target container of every ready pod
// before each treatment window and its revert after, and leaves the template
// alone.
func TestExecToggleFullRun(t *testing.T) {
	d, pe := newExecDriver(t, "")
	dep := d.c.target("app")
	targetPods(t, d.c.ns, dep)
	before := templateJSON(t, d.c.ns, "app")
	e := shortExperiment(d.c.ns, "app", execToggleSpec())
	e.Spec.Windows.Settle = "0s"
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
	container := dep.Spec.Template.Spec.Containers[0].Name
	on := fmt.Sprintf("%s/%s: jcmd 1 JFR.start name=perfexp", d.c.ns, container)
	off := fmt.Sprintf("%s/%s: jcmd 1 JFR.stop name=perfexp", d.c.ns, container)
	want := []string{on, off, on, off, on, off}
	for _, p := range fakePods {
		if got := pe.of(p.name); !reflect.DeepEqual(got, want) {
			t.Errorf("pod %s ran %q; want %q", p.name, got, want)
		}
	}
	if after := templateJSON(t, d.c.ns, "app"); after != before {
		t.Fatalf("template changed:\nbefore %s\nafter  %s", before, after)
	}
}

// A command that exits non-zero in one pod aborts the run; the pod where it
// succeeded is switched back at once, and the status quotes what failed.
func TestExecToggleRefusedAbortsAndRevertsTheOthers(t *testing.T) {
	ok, bad := fakePods[0], fakePods[1]
	d, pe := newExecDriver(t, bad.name)
	dep := d.c.target("app")
	targetPods(t, d.c.ns, dep)
	before := templateJSON(t, d.c.ns, "app")
	e := shortExperiment(d.c.ns, "app", execToggleSpec())
	e.Spec.Windows.Settle = "0s"
	if err := k8s.Create(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	exp := d.until("Aborted", terminal)
	if exp.Status.Phase != perfv1.PhaseAborted || exp.Status.Abort == nil || exp.Status.Abort.Reason != perfv1.ReasonToggleFailed {
		t.Fatalf("phase %s abort %+v", exp.Status.Phase, exp.Status.Abort)
	}
	for _, w := range []string{"pod " + bad.name, "exited with status 1", "already running"} {
		if !strings.Contains(exp.Status.Abort.Message, w) {
			t.Errorf("abort message %q does not mention %q", exp.Status.Abort.Message, w)
		}
	}
	d.assertRestored(before, "app")
	assertNothingApplied(t, exp)
	if got := pe.of(ok.name); len(got) != 2 || !strings.HasSuffix(got[1], "JFR.stop name=perfexp") {
		t.Errorf("pod %s ran %q; want the command, then its revert", ok.name, got)
	}
	if got := pe.of(bad.name); len(got) != 1 {
		t.Errorf("pod %s ran %q; want only the refused command", bad.name, got)
	}
}

// Without the pods/exec right (no executor), an exec toggle is refused in
// preflight: the target is never locked or changed, and the condition says how
// to allow it.
func TestExecToggleDisabledIsRefusedBeforeAnyChange(t *testing.T) {
	d := newDriver(t)
	dep := d.c.target("app")
	targetPods(t, d.c.ns, dep)
	before := templateJSON(t, d.c.ns, "app")
	if err := k8s.Create(context.Background(), shortExperiment(d.c.ns, "app", execToggleSpec())); err != nil {
		t.Fatal(err)
	}
	exp := d.until("stalled", func(e *perfv1.PerfExperiment) bool {
		return meta.IsStatusConditionTrue(e.Status.Conditions, perfv1.ConditionStalled)
	})
	c := meta.FindStatusCondition(exp.Status.Conditions, perfv1.ConditionStalled)
	if c.Reason != perfv1.ReasonInvalidSpec || !strings.Contains(c.Message, "toggles.exec.enabled=true") {
		t.Errorf("Stalled %s: %q; want InvalidSpec naming toggles.exec.enabled", c.Reason, c.Message)
	}
	if exp.Status.Phase != perfv1.PhasePending {
		t.Errorf("phase %s, want Pending", exp.Status.Phase)
	}
	var got appsv1.Deployment
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: d.c.ns, Name: "app"}, &got); err != nil {
		t.Fatal(err)
	}
	if _, held := got.Annotations[perfv1.AnnotationLock]; held {
		t.Errorf("target locked by a refused experiment: %v", got.Annotations)
	}
	if after := templateJSON(t, d.c.ns, "app"); after != before {
		t.Errorf("template changed:\nbefore %s\nafter  %s", before, after)
	}
}
