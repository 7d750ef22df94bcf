// Command pause is the pod sandbox's placeholder process: it holds the pod's
// namespaces open, does nothing, and exits cleanly on SIGTERM or SIGINT. As PID 1
// of a pod that shares its PID namespace it also reaps orphaned children, which
// would otherwise stay zombies.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && (os.Args[1] == "-v" || os.Args[1] == "--version") {
		fmt.Println("pause 3.10 (perf-operator)")
		return
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	reap := os.Getpid() == 1
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			fmt.Fprintf(os.Stderr, "pause: %v, exiting\n", sig)
			os.Exit(0)
		}
		for reap {
			// Signals coalesce, so collect every exited child per SIGCHLD.
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
