package toggle

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
)

// Runtime toggles switch a feature in the running pods, without a rollout: an
// http toggle sends a request to each pod (Sender), an exec toggle runs a
// command in each pod's container (Execer). Both share the fan-out and its
// compensation here; only how one pod is switched differs.

const (
	// maxInFlight bounds the switches one call has open at once: enough to switch
	// a large Deployment in a few round trips, small enough that many experiments
	// toggling together stay within the operator's goroutine budget.
	maxInFlight = 8
	// snippetLen is how much of a refusing answer's body (or a failed command's
	// output) goes into the error, enough for a typical error line without
	// flooding a condition message.
	snippetLen = 256
	// maxListed is how many pod errors a message lists before "and N more".
	maxListed = 5
)

// Pod is a target pod a runtime toggle is sent to.
type Pod struct {
	Name string
	IP   string
}

// PodError is the failure of one pod's switch. For http, StatusCode is the
// refusing answer's status; for exec, Command is the command line and ExitCode
// its non-zero exit status, or StatusCode the API server's refusal of the exec
// itself (403 without the pods/exec right). Both are 0 when the pod gave no answer (connection
// refused, timeout, a broken exec stream, cancellation); then Err says why.
type PodError struct {
	Pod        string
	Method     string
	URL        string
	StatusCode int
	Command    string
	ExitCode   int
	// Body is the start of the answer's body, or of the command's output,
	// trimmed to a short snippet.
	Body string
	Err  error
}

func (e *PodError) Error() string {
	switch {
	case e.Command != "" && e.StatusCode != 0:
		return fmt.Sprintf("pod %s: %s: the API server refused the exec (%d %s): %v", e.Pod, e.Command, e.StatusCode, http.StatusText(e.StatusCode), e.Err)
	case e.StatusCode != 0:
		msg := fmt.Sprintf("pod %s: %s %s answered %d %s", e.Pod, e.Method, e.URL, e.StatusCode, http.StatusText(e.StatusCode))
		if e.Body != "" {
			msg += fmt.Sprintf(": %q", e.Body)
		}
		return msg
	case e.ExitCode != 0:
		msg := fmt.Sprintf("pod %s: %s exited with status %d", e.Pod, e.Command, e.ExitCode)
		if e.Body != "" {
			msg += fmt.Sprintf(": %q", e.Body)
		}
		return msg
	case e.Command != "":
		return fmt.Sprintf("pod %s: %s: %v", e.Pod, e.Command, e.Err)
	case e.URL == "":
		return fmt.Sprintf("pod %s: %v", e.Pod, e.Err)
	}
	return fmt.Sprintf("pod %s: %s %s: %v", e.Pod, e.Method, e.URL, e.Err)
}

func (e *PodError) Unwrap() error { return e.Err }

// refused reports whether the pod answered and said no: it did not switch.
// Without an answer the switch may still have happened.
func (e *PodError) refused() bool { return e.StatusCode != 0 || e.ExitCode != 0 }

// FailedPods returns the names of the pods whose switches failed in an error
// returned by Revert, so the caller can keep just those in status.toggle.pods and
// retry them.
func FailedPods(err error) []string {
	var names []string
	var walk func(error)
	walk = func(err error) {
		if pe, ok := err.(*PodError); ok {
			names = append(names, pe.Pod)
			return
		}
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e)
			}
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		}
	}
	if err != nil {
		walk(err)
	}
	return names
}

// podSwitch switches one pod on or off; nil means it did.
type podSwitch func(ctx context.Context, p Pod) *PodError

// applyAll switches every pod on and returns the names of all pods, in order,
// when all did.
//
// On any failure it stops starting new switches, switches off every pod the
// toggle may have reached (those that switched, and those that gave no answer,
// since a timed-out switch may still have taken effect; not those that refused)
// and returns an error naming each failing pod. Then applied lists the pods on
// which the toggle may still be on because switching them off failed too: the
// caller must record them and keep reverting. It is nil when the compensation
// succeeded.
func applyAll(ctx context.Context, pods []Pod, on, off podSwitch) (applied []string, err error) {
	if len(pods) == 0 {
		// Switching no pod would measure nothing and report it as the toggle's cost.
		return nil, errors.New("no target pods to send the toggle to")
	}
	res := switchAll(ctx, pods, on, true)
	var failures []error
	var undo []Pod
	for i, r := range res {
		if r.err != nil {
			failures = append(failures, r.err)
		}
		if r.sent && (r.err == nil || !r.err.refused()) {
			undo = append(undo, pods[i])
		}
	}
	if len(failures) == 0 {
		names := make([]string, len(pods))
		for i, p := range pods {
			names[i] = p.Name
		}
		return names, nil
	}
	applyErr := fmt.Errorf("applying the toggle failed on %d of %d pods: %w", len(failures), len(pods), joinErrors(failures))
	if len(undo) == 0 {
		return nil, applyErr
	}
	revertErr := revertAll(ctx, undo, off)
	if revertErr == nil {
		return nil, applyErr
	}
	return FailedPods(revertErr), fmt.Errorf("%w; reverting the pods it reached failed too: %w", applyErr, revertErr)
}

// revertAll switches every pod off, whatever happens to the others, and returns
// all failures joined; FailedPods lists their pods.
func revertAll(ctx context.Context, pods []Pod, off podSwitch) error {
	var failures []error
	for _, r := range switchAll(ctx, pods, off, false) {
		if r.err != nil {
			failures = append(failures, r.err)
		}
	}
	if len(failures) == 0 {
		return nil
	}
	return fmt.Errorf("reverting the toggle failed on %d of %d pods: %w", len(failures), len(pods), joinErrors(failures))
}

// outcome is what happened to one pod's switch. sent is false when it was never
// started (the context ended, or an earlier failure stopped applyAll).
type outcome struct {
	sent bool
	err  *PodError
}

// switchAll runs sw on the pods with at most maxInFlight open at once and
// returns one outcome per pod, in order. With failFast, no new switch starts
// after one has failed, so fewer pods need the compensating revert.
func switchAll(ctx context.Context, pods []Pod, sw podSwitch, failFast bool) []outcome {
	out := make([]outcome, len(pods))
	if len(pods) == 1 {
		// One pod (the common target of one replica) is switched on the
		// caller's goroutine: the same bounded call, one goroutine fewer
		// while it is open.
		if err := ctx.Err(); err != nil {
			out[0].err = &PodError{Pod: pods[0].Name, Err: fmt.Errorf("not sent: %w", err)}
			return out
		}
		out[0].sent = true
		if err := sw(ctx, pods[0]); err != nil {
			out[0].err = err
		}
		return out
	}
	sem := make(chan struct{}, maxInFlight)
	var wg sync.WaitGroup
	var failed atomic.Bool
	for i, p := range pods {
		// Waiting for a slot is bounded: every open switch ends within its
		// timeout, or at once when ctx ends.
		sem <- struct{}{}
		if err := ctx.Err(); err != nil {
			<-sem
			out[i].err = &PodError{Pod: p.Name, Err: fmt.Errorf("not sent: %w", err)}
			continue
		}
		if failFast && failed.Load() {
			<-sem
			continue
		}
		out[i].sent = true
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := sw(ctx, p); err != nil {
				out[i].err = err
				failed.Store(true)
			}
		}()
	}
	wg.Wait()
	return out
}

// trimSnippet makes the start of a body or an output fit an error message:
// valid UTF-8, trimmed, marked when cut. b may hold one byte more than
// snippetLen, which says it was cut.
func trimSnippet(b []byte) string {
	s := strings.ToValidUTF8(string(b), "?")
	cut := len(b) > snippetLen
	if cut {
		s = strings.ToValidUTF8(string(b[:snippetLen]), "")
	}
	s = strings.TrimSpace(s)
	if cut {
		s += "…"
	}
	return s
}

// joinedErrors joins errors with "; " on one line, for condition messages, and
// lists at most maxListed of them; errors.Is, errors.As and FailedPods still
// see all of them.
type joinedErrors []error

func joinErrors(errs []error) error { return joinedErrors(errs) }

func (j joinedErrors) Error() string {
	parts := make([]string, 0, maxListed+1)
	for i, e := range j {
		if i == maxListed {
			parts = append(parts, fmt.Sprintf("and %d more", len(j)-maxListed))
			break
		}
		parts = append(parts, e.Error())
	}
	return strings.Join(parts, "; ")
}

func (j joinedErrors) Unwrap() []error { return j }
