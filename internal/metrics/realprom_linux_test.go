package metrics

import (
	"os/exec"
	"syscall"
)

// killWithParent has the kernel kill the child when the test binary dies
// without running TestMain's cleanup (a panic, a timeout).
func killWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
