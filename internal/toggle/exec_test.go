package toggle

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilexec "k8s.io/client-go/util/exec"
	"k8s.io/streaming/pkg/httpstream"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
)

// fakeExecutor answers per pod and command from a table and records every call.
type fakeExecutor struct {
	mu    sync.Mutex
	calls []string // "pod: command"
	// answer returns the output and the error for one call; nil means success.
	answer func(ctx context.Context, pod string, command []string) (string, error)
}

func (f *fakeExecutor) Exec(ctx context.Context, namespace, pod, container string, command []string, stdout, stderr io.Writer) error {
	f.mu.Lock()
	f.calls = append(f.calls, fmt.Sprintf("%s/%s/%s: %s", namespace, pod, container, strings.Join(command, " ")))
	f.mu.Unlock()
	if f.answer == nil {
		return nil
	}
	out, err := f.answer(ctx, pod, command)
	_, _ = io.WriteString(stderr, out)
	return err
}

func (f *fakeExecutor) sorted() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Sorted(slices.Values(f.calls))
}

func exit(code int) error {
	return utilexec.CodeExitError{Err: fmt.Errorf("command terminated with exit code %d", code), Code: code}
}

var jfr = &perfv1.ExecToggle{
	Command: []string{"jcmd", "1", "JFR.start", "name=perfexp"},
	Revert:  []string{"jcmd", "1", "JFR.stop", "name=perfexp"},
	Timeout: "2s",
}

var twoPods = []Pod{{Name: "a"}, {Name: "b"}}

func TestExecerApplyAll(t *testing.T) {
	f := &fakeExecutor{}
	applied, err := Execer{Executor: f}.Apply(context.Background(), jfr, "shop", "app", twoPods)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(applied, []string{"a", "b"}) {
		t.Errorf("applied = %v", applied)
	}
	want := []string{"shop/a/app: jcmd 1 JFR.start name=perfexp", "shop/b/app: jcmd 1 JFR.start name=perfexp"}
	if got := f.sorted(); !slices.Equal(got, want) {
		t.Errorf("calls = %q, want %q", got, want)
	}
}

// A non-zero exit is a refusal: that pod is not reverted, the other is, and
// the error says which pod, what ran, its status and what it printed.
func TestExecerApplyExitRevertsTheOther(t *testing.T) {
	f := &fakeExecutor{answer: func(_ context.Context, pod string, cmd []string) (string, error) {
		if pod == "b" && cmd[2] == "JFR.start" {
			return "Could not start recording: disk full\n", exit(1)
		}
		return "", nil
	}}
	applied, err := Execer{Executor: f}.Apply(context.Background(), jfr, "shop", "app", twoPods)
	if err == nil {
		t.Fatal("no error")
	}
	if applied != nil {
		t.Errorf("applied = %v after a successful compensation, want nil", applied)
	}
	for _, want := range []string{"1 of 2 pods", "pod b: jcmd 1 JFR.start name=perfexp exited with status 1", `"Could not start recording: disk full"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	calls := f.sorted()
	if !slices.Contains(calls, "shop/a/app: jcmd 1 JFR.stop name=perfexp") || slices.Contains(calls, "shop/b/app: jcmd 1 JFR.stop name=perfexp") {
		t.Errorf("calls = %q: want the revert on a only", calls)
	}
}

// A command that does not finish in time may still have switched: it is
// reverted like one that succeeded.
func TestExecerApplyTimeoutIsReverted(t *testing.T) {
	f := &fakeExecutor{answer: func(ctx context.Context, pod string, cmd []string) (string, error) {
		if pod == "b" && cmd[2] == "JFR.start" {
			<-ctx.Done()
			return "", ctx.Err()
		}
		return "", nil
	}}
	e := *jfr
	e.Timeout = "1s"
	_, err := Execer{Executor: f}.Apply(context.Background(), &e, "shop", "app", twoPods)
	if err == nil || !strings.Contains(err.Error(), "pod b: jcmd 1 JFR.start name=perfexp: not finished within 1s") {
		t.Fatalf("error = %v", err)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error does not wrap DeadlineExceeded: %v", err)
	}
	calls := f.sorted()
	for _, want := range []string{"shop/a/app: jcmd 1 JFR.stop name=perfexp", "shop/b/app: jcmd 1 JFR.stop name=perfexp"} {
		if !slices.Contains(calls, want) {
			t.Errorf("calls = %q lack %q", calls, want)
		}
	}
}

// When the compensation fails too, Apply names the pods the toggle may still be
// on, for the caller to record and keep reverting.
func TestExecerApplyCompensationFails(t *testing.T) {
	f := &fakeExecutor{answer: func(_ context.Context, pod string, cmd []string) (string, error) {
		switch {
		case pod == "b" && cmd[2] == "JFR.start":
			return "", exit(2)
		case pod == "a" && cmd[2] == "JFR.stop":
			return "", errors.New("error dialing backend: connection reset")
		}
		return "", nil
	}}
	applied, err := Execer{Executor: f}.Apply(context.Background(), jfr, "shop", "app", twoPods)
	if !slices.Equal(applied, []string{"a"}) {
		t.Errorf("applied = %v, want [a]", applied)
	}
	if err == nil || !strings.Contains(err.Error(), "reverting the pods it reached failed too") || !strings.Contains(err.Error(), "connection reset") {
		t.Errorf("error = %v", err)
	}
}

func TestExecerRevertCollectsAllErrors(t *testing.T) {
	f := &fakeExecutor{answer: func(_ context.Context, pod string, _ []string) (string, error) {
		if pod == "c" {
			return "", nil
		}
		return "No recording with name perfexp", exit(1)
	}}
	err := Execer{Executor: f}.Revert(context.Background(), jfr, "shop", "app", []Pod{{Name: "a"}, {Name: "b"}, {Name: "c"}})
	if got := FailedPods(err); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("FailedPods = %v (error %v)", got, err)
	}
	if len(f.sorted()) != 3 {
		t.Errorf("calls = %q, want one per pod", f.sorted())
	}
}

// A command that prints a lot is cut to a snippet in the error, and the
// buffer never holds more.
func TestExecerOutputIsBounded(t *testing.T) {
	big := strings.Repeat("x", 1<<20)
	f := &fakeExecutor{answer: func(context.Context, string, []string) (string, error) { return big, exit(3) }}
	_, err := Execer{Executor: f}.Apply(context.Background(), jfr, "shop", "app", twoPods[:1])
	var pe *PodError
	if !errors.As(err, &pe) {
		t.Fatalf("error %v has no PodError", err)
	}
	if pe.ExitCode != 3 || len(pe.Body) > snippetLen+len("…") || !strings.HasSuffix(pe.Body, "…") {
		t.Errorf("exit %d, body of %d bytes %q…", pe.ExitCode, len(pe.Body), pe.Body[:10])
	}
}

func TestExecerRefusesWithoutExecutorOrSpec(t *testing.T) {
	if _, err := (Execer{}).Apply(context.Background(), jfr, "shop", "app", twoPods); !errors.Is(err, ErrExecDisabled) {
		t.Errorf("nil executor: %v, want ErrExecDisabled", err)
	}
	if err := (Execer{}).Revert(context.Background(), jfr, "shop", "app", twoPods); !errors.Is(err, ErrExecDisabled) {
		t.Errorf("nil executor revert: %v, want ErrExecDisabled", err)
	}
	f := &fakeExecutor{}
	if _, err := (Execer{Executor: f}).Apply(context.Background(), &perfv1.ExecToggle{Command: []string{"true"}}, "shop", "app", twoPods); !errors.Is(err, ErrInvalidSpec) {
		t.Errorf("no revert: %v, want ErrInvalidSpec", err)
	}
	if _, err := (Execer{Executor: f}).Apply(context.Background(), &perfv1.ExecToggle{Command: []string{"true"}, Revert: []string{"true"}, Timeout: "soon"}, "shop", "app", twoPods); err == nil || !strings.Contains(err.Error(), "toggle.exec.timeout") {
		t.Errorf("bad timeout: %v", err)
	}
	if _, err := (Execer{Executor: f}).Apply(context.Background(), jfr, "shop", "app", nil); err == nil {
		t.Error("no pods: no error")
	}
	if len(f.calls) != 0 {
		t.Errorf("commands ran on refused input: %q", f.calls)
	}
}

// An exec the API server refuses (no pods/exec right) never reached the
// container: it is a refusal, not reverted, and the error says so. Over
// WebSocket the refusal arrives wrapped in an upgrade failure.
func TestExecerAPIRefusalIsNotReverted(t *testing.T) {
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "pods/exec"}, "b", errors.New("no RBAC"))
	for name, refusal := range map[string]error{
		"spdy":      forbidden,
		"websocket": &httpstream.UpgradeFailureError{Cause: forbidden},
	} {
		t.Run(name, func(t *testing.T) {
			f := &fakeExecutor{answer: func(_ context.Context, pod string, cmd []string) (string, error) {
				if pod == "b" {
					return "", refusal
				}
				return "", nil
			}}
			_, err := Execer{Executor: f}.Apply(context.Background(), jfr, "shop", "app", twoPods)
			if err == nil || !strings.Contains(err.Error(), "the API server refused the exec (403 Forbidden)") {
				t.Fatalf("error = %v", err)
			}
			calls := f.sorted()
			if slices.Contains(calls, "shop/b/app: jcmd 1 JFR.stop name=perfexp") {
				t.Errorf("the refused pod was sent the revert: %q", calls)
			}
			if !slices.Contains(calls, "shop/a/app: jcmd 1 JFR.stop name=perfexp") {
				t.Errorf("the pod that switched was not reverted: %q", calls)
			}
		})
	}
}
