package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
	"perfexp.dev/perf-operator/controllers"
	"perfexp.dev/perf-operator/internal/engine"
)

// docs/plugin.md's exit-code table is the code's: same codes, same names,
// same meanings, in order, and every code distinct.
func TestExitCodesDocumented(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "docs", "plugin.md"))
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| (\\d+) \\| `(\\w+)` \\| (.+) \\|$")
	var doc []string
	for _, m := range row.FindAllStringSubmatch(string(raw), -1) {
		doc = append(doc, m[1]+" "+m[2]+" "+m[3])
	}
	var code []string
	seen := map[int]bool{}
	for _, c := range exitCodes {
		code = append(code, strconv.Itoa(c.Code)+" "+c.Name+" "+c.Meaning)
		if seen[c.Code] {
			t.Errorf("exit code %d twice", c.Code)
		}
		seen[c.Code] = true
	}
	if strings.Join(doc, "\n") != strings.Join(code, "\n") {
		t.Fatalf("docs/plugin.md exit codes:\n%s\nthe code's:\n%s", strings.Join(doc, "\n"), strings.Join(code, "\n"))
	}
}

// wait ends with the outcome's code on every ending, and with 8 on a stalled
// run, at once.
func TestWaitExitCodes(t *testing.T) {
	cluster(t)
	ns := "wait"
	if err := k8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	for state, want := range map[string]int{"Pass": ExitOK, "Fail": ExitFail, "Aborted": ExitAborted, "Stalled": ExitStalled} {
		name := "wait-" + strings.ToLower(state)
		gateState(t, ns, name, state)
		out, err := kubectl(t, "wait", name, "-n", ns)
		if code, msg := exitStatus(err); code != want {
			t.Errorf("wait on %s: exit %d (%s), want %d:\n%s", state, code, msg, want, out)
		}
		if !strings.Contains(out, "perfexperiment "+ns+"/"+name+": phase ") {
			t.Errorf("wait on %s printed no phase: %q", state, out)
		}
	}
	if _, err := kubectl(t, "wait", "nope", "-n", ns); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("wait on a missing experiment: %v", err)
	}
}

// wait follows a queued run through its start to its ending with one watch,
// printing each change once, and a queued run that never starts ends at the
// timeout with 7.
func TestWaitFollowsTheRun(t *testing.T) {
	c := cluster(t)
	ns := "follow"
	if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	gateState(t, ns, "queued", "Queued")
	_, err := kubectl(t, "wait", "queued", "-n", ns, "--timeout", "1s")
	if code, msg := exitStatus(err); code != ExitTimeout || !strings.Contains(msg, "Queued") {
		t.Errorf("wait on a queued run with --timeout: exit %d (%s), want %d naming Queued", code, msg, ExitTimeout)
	}

	flags := &clusterFlags{cf: genericclioptions.NewConfigFlags(false)}
	flags.cf.KubeConfig = &kubeconfig
	cfg, _, err := flags.config()
	if err != nil {
		t.Fatal(err)
	}
	wc, err := client.NewWithWatch(cfg, client.Options{Scheme: pluginScheme()})
	if err != nil {
		t.Fatal(err)
	}
	out := &lockedBuffer{}
	done := make(chan error, 1)
	key := client.ObjectKey{Namespace: ns, Name: "queued"}
	go func() { done <- waitFor(context.Background(), wc, key, 0, out) }()
	// The holder ends: the run starts, then ends with verdict Fail. Each step
	// waits until wait printed the previous one, so none is coalesced.
	step := func(seen string, edit func(*perfv1.PerfExperiment) engine.Decision) {
		t.Helper()
		for !strings.Contains(out.String(), seen) {
			select {
			case err := <-done:
				t.Fatalf("wait ended early: %v\n%s", err, out.String())
			case <-time.After(10 * time.Millisecond):
			}
		}
		exp := &perfv1.PerfExperiment{}
		if err := c.Get(context.Background(), key, exp); err != nil {
			t.Fatal(err)
		}
		d := edit(exp)
		controllers.SetConditions(&exp.Status, exp.Spec.SuccessCriteria, exp.Generation, d, time.Date(2026, 3, 2, 11, 0, 0, 0, time.UTC))
		if err := c.Status().Update(context.Background(), exp); err != nil {
			t.Fatal(err)
		}
	}
	step("Queued", func(exp *perfv1.PerfExperiment) engine.Decision {
		exp.Status.Phase = perfv1.PhaseBaseline
		return engine.Decision{Waiting: "baseline window of stage 500qps: measuring"}
	})
	step("phase Baseline: Progressing: baseline window", func(exp *perfv1.PerfExperiment) engine.Decision {
		gen := exp.Generation
		exp.Status = finishedStatus(time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC), false)
		exp.Status.Verdict, exp.Status.ObservedGeneration = perfv1.VerdictFail, gen
		return engine.Decision{}
	})
	err = <-done
	if code, msg := exitStatus(err); code != ExitFail {
		t.Fatalf("wait: exit %d (%s), want %d\n%s", code, msg, ExitFail, out.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || !strings.HasSuffix(lines[2], "phase Succeeded, verdict Fail") {
		t.Fatalf("want queued, baseline and the ending, one line each:\n%s", out.String())
	}
}

// lockedBuffer is a bytes.Buffer read while the wait writes it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
