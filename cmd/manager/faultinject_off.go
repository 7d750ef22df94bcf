//go:build !faultinject

package main

import (
	"sigs.k8s.io/controller-runtime/pkg/client"

	"perfexp.dev/perf-operator/internal/toggle"
)

// testExecutor is the faultinject build's exec stand-in (faultinject.go);
// production builds have none.
func testExecutor(client.Reader) toggle.PodExecutor { return nil }
