package testenv

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// AdminKubeconfig writes a kubeconfig for a new system:masters user of the
// control plane to dir/kubeconfig-NAME and returns its path, for binaries the
// tests run as processes (kubectl, the operator, the kubectl plugin).
func (e *Env) AdminKubeconfig(dir, name string) (string, error) {
	user, err := e.AddUser(envtest.User{Name: name, Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return "", err
	}
	b, err := user.KubeConfig()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "kubeconfig-"+name)
	return path, os.WriteFile(path, b, 0o600)
}

// GoBuild builds a package of the project's module (such as ./cmd/manager)
// into out.
func GoBuild(out, pkg string, flags ...string) error {
	args := append([]string{"build", "-o", out}, flags...)
	cmd := exec.Command("go", append(args, pkg)...)
	cmd.Dir = RepoRoot()
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return nil
}

// GoBuildAsShipped builds a package as hack/image.sh builds it into the
// operator's image: static (CGO_ENABLED=0), path-independent and stripped. A
// benchmark of the manager's memory measures the binary that runs in the
// cluster: a cgo build maps libc and the dynamic loader besides, and its
// resident file pages differ.
func GoBuildAsShipped(out, pkg string) error {
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", out, pkg)
	cmd.Dir = RepoRoot()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return nil
}

// PrometheusBinaries finds prometheus and promtool on PATH, or runs
// hack/prometheus.sh, which installs Debian's prometheus package (or unpacks it
// into bin/) and prints their paths. logf reports the install and its time.
func PrometheusBinaries(logf func(format string, args ...any)) (prom, tool string, err error) {
	prom, err1 := exec.LookPath("prometheus")
	tool, err2 := exec.LookPath("promtool")
	if err1 == nil && err2 == nil {
		return prom, tool, nil
	}
	script := filepath.Join(RepoRoot(), "hack", "prometheus.sh")
	logf("prometheus/promtool not on PATH: running %s", script)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, script)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	began := time.Now()
	if err := cmd.Run(); err != nil {
		return "", "", fmt.Errorf("%s failed (%v); run it by hand (or `make prometheus`) to install Debian's prometheus package: %s", script, err, tail(stderr.String(), 2000))
	}
	logf("hack/prometheus.sh took %s", time.Since(began).Round(time.Millisecond))
	lines := strings.Fields(strings.TrimSpace(stdout.String()))
	if len(lines) < 2 {
		return "", "", fmt.Errorf("%s printed %q, want the paths of prometheus and promtool", script, stdout.String())
	}
	return lines[len(lines)-2], lines[len(lines)-1], nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
