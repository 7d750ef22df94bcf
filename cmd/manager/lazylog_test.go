package main

import (
	"bytes"
	"errors"
	"regexp"
	"testing"

	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// A logger whose values are deferred writes exactly what the logger it wraps
// would have written, names, values, levels and errors alike.
func TestLazyValuesLogTheSame(t *testing.T) {
	ts := regexp.MustCompile(`"ts":"[^"]*",?`)
	// A stack trace is compared by its first frame, the line that logged (the
	// frames below it are this test's two calls of write).
	below := regexp.MustCompile(`(stacktrace":"[^\\]*\\n\\t[^\\]*)[^"]*`)
	write := func(wrap func(logr.Logger) logr.Logger) string {
		var b bytes.Buffer
		l := wrap(zap.New(zap.WriteTo(&b), zap.Level(zapcore.Level(-1))))
		c := l.WithName("controller").WithValues("controller", "perfexperiment", "obj", map[string]string{"name": "a", "namespace": "b"})
		r := c.WithValues("reconcileID", "42")
		r.Info("window opened", "stage", 0)
		r.V(1).Info("reconciled", "phase", "Baseline")
		r.V(2).Info("not written")
		c.WithName("sub").WithValues("k", 1).Error(errors.New("boom"), "action failed", "action", "ApplyToggle")
		c.Info("no reconcile ID")
		l.Info("bare")
		return below.ReplaceAllString(ts.ReplaceAllString(b.String(), ""), "$1")
	}
	plain := write(func(l logr.Logger) logr.Logger { return l })
	lazy := write(lazyValues)
	if plain != lazy {
		t.Fatalf("lazy logger wrote\n%s\nthe logger it wraps\n%s", lazy, plain)
	}
	if n := bytes.Count([]byte(plain), []byte("\n")); n != 5 {
		t.Fatalf("%d lines, want 5:\n%s", n, plain)
	}
}
