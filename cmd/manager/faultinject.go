//go:build faultinject

package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	utilexec "k8s.io/client-go/util/exec"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"perfexp.dev/perf-operator/internal/toggle"
)

// testExecutor, in a faultinject build with PERFEXP_EXEC_VIA_HTTP=<port>, runs
// exec toggles as an HTTP POST of the command line to the pod's IP and port:
// test/crash plays the pods with HTTP servers on loopback addresses, and
// envtest has no kubelet to exec in. 2xx is exit 0, 409 is exit 1 (a refusal),
// anything else is an outcome unknown, as a broken exec stream is.
func testExecutor(r client.Reader) toggle.PodExecutor {
	port := os.Getenv("PERFEXP_EXEC_VIA_HTTP")
	if port == "" {
		return nil
	}
	return httpExec{r: r, port: port}
}

type httpExec struct {
	r    client.Reader
	port string
}

func (h httpExec) Exec(ctx context.Context, namespace, pod, _ string, command []string, stdout, _ io.Writer) error {
	p := &corev1.Pod{}
	if err := h.r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: pod}, p); err != nil {
		return err
	}
	url := "http://" + net.JoinHostPort(p.Status.PodIP, h.port) + "/exec"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(strings.Join(command, " ")))
	if err != nil {
		return err
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(stdout, resp.Body)
	switch {
	case resp.StatusCode/100 == 2:
		return nil
	case resp.StatusCode == http.StatusConflict:
		return utilexec.CodeExitError{Err: fmt.Errorf("command terminated with exit code 1"), Code: 1}
	}
	return fmt.Errorf("exec stand-in answered %s", resp.Status)
}
