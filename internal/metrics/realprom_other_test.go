//go:build !linux

package metrics

import "os/exec"

// killWithParent is a no-op where the kernel has no parent-death signal.
func killWithParent(*exec.Cmd) {}
