//go:build !faultinject

package controllers

import "perfexp.dev/perf-operator/internal/engine"

// afterEffect is the fault-injection seam (see faultinject.go); without the
// faultinject build tag it does nothing.
func afterEffect(engine.ActionKind) {}
