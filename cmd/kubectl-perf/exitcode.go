package main

import (
	"fmt"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
)

// Exit codes of `wait`, `report --exit-code` and `guard --exit-code`: 0 is a
// good outcome, and each bad one has its own code, so a CI step can tell a
// failed criterion from an aborted run from a command that could not run at
// all. docs/plugin.md lists them; TestExitCodesDocumented keeps it equal to
// exitCodes.
const (
	ExitOK           = 0 // Pass or NoEffect; guard: no guardrail tripped
	ExitError        = 1 // the command could not run (usage, API, file errors)
	ExitFail         = 2 // verdict Fail: an overhead exceeds its success criterion
	ExitInconclusive = 3 // verdict Inconclusive: a window could not be trusted
	ExitAborted      = 4 // phase Aborted (guard: a guardrail would have aborted)
	ExitFailed       = 5 // phase Failed: the run could not complete
	ExitNotFinished  = 6 // report: the experiment is still running
	ExitTimeout      = 7 // wait: --timeout passed before the run ended
	ExitStalled      = 8 // wait: the run is Stalled and needs a person (target missing, no limits, ...)
)

// exitCodes is every code with its constant's name and meaning, as
// docs/plugin.md's table gives them.
var exitCodes = []struct {
	Code          int
	Name, Meaning string
}{
	{ExitOK, "ExitOK", "Pass or NoEffect; guard: no guardrail tripped"},
	{ExitError, "ExitError", "the command could not run (usage, API or file errors)"},
	{ExitFail, "ExitFail", "verdict Fail: an overhead exceeds its success criterion"},
	{ExitInconclusive, "ExitInconclusive", "verdict Inconclusive: a window could not be trusted"},
	{ExitAborted, "ExitAborted", "phase Aborted (guard: a guardrail would have aborted)"},
	{ExitFailed, "ExitFailed", "phase Failed: the run could not complete"},
	{ExitNotFinished, "ExitNotFinished", "report: the experiment is still running"},
	{ExitTimeout, "ExitTimeout", "wait: --timeout passed before the run ended"},
	{ExitStalled, "ExitStalled", "wait: the run is Stalled and needs a person"},
}

// exitError ends the plugin with a code; msg (may be empty) goes to stderr.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return fmt.Sprintf("exit status %d: %s", e.code, e.msg) }

// outcomeCode is the exit code of an experiment's outcome as its status says.
// The phase decides first: an aborted run's verdict is Inconclusive, but what
// a pipeline must learn is that it was aborted.
func outcomeCode(st *perfv1.PerfExperimentStatus) int {
	switch {
	case st.Phase == perfv1.PhaseAborted:
		return ExitAborted
	case st.Phase == perfv1.PhaseFailed:
		return ExitFailed
	case !st.Phase.IsTerminal():
		return ExitNotFinished
	case st.Verdict == perfv1.VerdictFail:
		return ExitFail
	case st.Verdict == perfv1.VerdictInconclusive:
		return ExitInconclusive
	}
	return ExitOK
}
