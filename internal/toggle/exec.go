package toggle

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
	"k8s.io/streaming/pkg/httpstream"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
)

// defaultExecTimeout applies when the toggle has no timeout, the CRD's default.
var defaultExecTimeout, _ = perfv1.DefaultExecToggleTimeout.Parse()

// PodExecutor runs a command in a container of a pod, writing its output to
// stdout and stderr. A command that ran and exited non-zero returns an error
// that is a k8s.io/client-go/util/exec.ExitError; any other error means the
// command's outcome is unknown.
type PodExecutor interface {
	Exec(ctx context.Context, namespace, pod, container string, command []string, stdout, stderr io.Writer) error
}

// Execer runs exec toggles: a command in the target container of every pod, and
// its revert. Apply and Revert have the contract of Sender's.
type Execer struct {
	// Executor runs the commands; RemoteExecutor in the operator, a fake in tests.
	// A nil Executor refuses every exec toggle: the operator runs without the
	// pods/exec right unless the Helm chart's toggles.exec.enabled grants it.
	Executor PodExecutor
}

// ErrExecDisabled is returned when the operator was started without a pods/exec
// executor.
var ErrExecDisabled = errors.New("exec toggles are disabled in this operator: install it with the Helm value toggles.exec.enabled=true (it grants the pods/exec right), or use an http toggle")

// Apply runs the toggle's command in container of every pod; exit status 0 is
// success. It returns the names of all pods, in order, when all succeeded. A
// pod whose command exited non-zero refused, and is not sent the revert; one
// whose command timed out or whose stream broke may have switched, and is.
func (x Execer) Apply(ctx context.Context, e *perfv1.ExecToggle, namespace, container string, pods []Pod) ([]string, error) {
	timeout, err := x.check(e)
	if err != nil {
		return nil, err
	}
	return applyAll(ctx, pods, x.switcher(namespace, container, e.Command, timeout), x.switcher(namespace, container, e.Revert, timeout))
}

// Revert runs the toggle's revert command in every pod, whatever happens to the
// others, and returns all failures joined; FailedPods lists their pods.
func (x Execer) Revert(ctx context.Context, e *perfv1.ExecToggle, namespace, container string, pods []Pod) error {
	timeout, err := x.check(e)
	if err != nil {
		return err
	}
	return revertAll(ctx, pods, x.switcher(namespace, container, e.Revert, timeout))
}

func (x Execer) check(e *perfv1.ExecToggle) (time.Duration, error) {
	if x.Executor == nil {
		return 0, ErrExecDisabled
	}
	if len(e.Command) == 0 || len(e.Revert) == 0 {
		return 0, errorf(ErrInvalidSpec, "the exec toggle needs both command and revert")
	}
	d, err := e.Timeout.Parse()
	if err != nil {
		return 0, fmt.Errorf("toggle.exec.timeout %q %v", e.Timeout, err)
	}
	if d <= 0 {
		return defaultExecTimeout, nil
	}
	return d, nil
}

func (x Execer) switcher(namespace, container string, command []string, timeout time.Duration) podSwitch {
	line := strings.Join(command, " ")
	return func(ctx context.Context, p Pod) *PodError {
		pe := &PodError{Pod: p.Name, Command: line}
		rctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		// Both streams go into one bounded buffer: the error shows what the
		// command said, in the order it said it.
		out := &limitedBuffer{max: snippetLen + 1}
		err := x.Executor.Exec(rctx, namespace, p.Name, container, command, out, out)
		if err == nil {
			return nil
		}
		var exit utilexec.ExitError
		if errors.As(err, &exit) && exit.Exited() && exit.ExitStatus() != 0 {
			pe.ExitCode = exit.ExitStatus()
			pe.Body = trimSnippet(out.Bytes())
			return pe
		}
		if code := apiRefusal(err); code != 0 {
			// The API server refused the exec (no right, no such pod): the
			// command never ran, so there is nothing to revert.
			pe.StatusCode, pe.Err = code, err
			return pe
		}
		if ctx.Err() == nil && errors.Is(rctx.Err(), context.DeadlineExceeded) {
			pe.Err = fmt.Errorf("not finished within %s: %w", timeout, context.DeadlineExceeded)
		} else {
			pe.Err = err
		}
		return pe
	}
}

// apiRefusal is the HTTP status with which the API server refused an exec
// before it reached the container (401, 403, 404), or 0. Over WebSocket the
// refusal comes wrapped in an upgrade failure that does not unwrap.
func apiRefusal(err error) int {
	var se *apierrors.StatusError
	var uf *httpstream.UpgradeFailureError
	if errors.As(err, &uf) && uf.Cause != nil {
		err = uf.Cause
	}
	if !errors.As(err, &se) {
		return 0
	}
	switch code := int(se.Status().Code); code {
	case 401, 403, 404:
		return code
	}
	return 0
}

// limitedBuffer keeps the first max bytes written to it and drops the rest, so
// a chatty command cannot grow the operator's memory. stdout and stderr are
// copied into it by two goroutines, hence the lock.
type limitedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	max int
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.max - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (b *limitedBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}

// RemoteExecutor runs commands through the API server's pods/exec subresource,
// over WebSocket, falling back to SPDY for API servers that do not upgrade to
// WebSocket: what kubectl exec does.
type RemoteExecutor struct {
	Config *rest.Config
	// Client is a REST client for the core API group (a clientset's
	// CoreV1().RESTClient()).
	Client rest.Interface
}

// Exec implements PodExecutor.
func (r RemoteExecutor) Exec(ctx context.Context, namespace, pod, container string, command []string, stdout, stderr io.Writer) error {
	req := r.Client.Post().Resource("pods").Namespace(namespace).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{
			Container: container, Command: command, Stdout: true, Stderr: true,
		}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(r.Config, "GET", req.URL().String())
	if err != nil {
		return err
	}
	spdy, err := remotecommand.NewSPDYExecutor(r.Config, "POST", req.URL())
	if err != nil {
		return err
	}
	exec, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return err
	}
	return exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: stdout, Stderr: stderr})
}
