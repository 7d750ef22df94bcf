//go:build faultinject

package controllers

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"

	"perfexp.dev/perf-operator/internal/engine"
)

// A manager built with -tags faultinject kills itself with SIGKILL right after
// the Nth effect of one kind succeeded and before the status write that
// records it: PERFEXP_KILL_AFTER=ApplyToggle:1. test/crash restarts it and
// checks that nothing is lost or done twice. Production builds carry a no-op
// (faultinject_off.go).
var fault = parseFault(os.Getenv("PERFEXP_KILL_AFTER"))

type faultPoint struct {
	kind engine.ActionKind
	n    int32
	seen atomic.Int32
}

func parseFault(s string) *faultPoint {
	kind, n, ok := strings.Cut(s, ":")
	if !ok {
		return nil
	}
	v, err := strconv.Atoi(n)
	if err != nil || v < 1 {
		return nil
	}
	return &faultPoint{kind: engine.ActionKind(kind), n: int32(v)}
}

func afterEffect(kind engine.ActionKind) {
	if fault == nil || fault.kind != kind || fault.seen.Add(1) != fault.n {
		return
	}
	fmt.Fprintf(os.Stderr, "faultinject: SIGKILL after %s #%d, before its status write\n", kind, fault.n)
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // the signal ends the process; nothing after the effect runs
}
