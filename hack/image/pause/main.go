// Command pause is the pod sandbox process of the local cluster (hack/cluster.sh):
// containerd runs it as every pod's infrastructure container to hold the pod's
// namespaces. It blocks until SIGTERM or SIGINT and, when it is PID 1 of a pod that
// shares its process namespace, reaps the orphans re-parented to it so they do not
// linger as zombies. It is built as a static binary and put on an empty base image.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for sig := range signals {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		if os.Getpid() == 1 {
			reap()
		}
	}
}

// reap collects every child that has exited, without blocking: one SIGCHLD may stand
// for several exits.
func reap() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
