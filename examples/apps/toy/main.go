// Command toy is a small HTTP service for perf-operator experiments to target. Each
// request costs a known CPU time and allocation, and three switches — profiling,
// memory tracking and buffers — change that cost by a known amount. Each switch
// can be set by an environment variable, a flag, or the admin HTTP endpoint, so
// every toggle kind of a PerfExperiment has something to measure.
package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	cfg, err := parseConfig(os.Args[1:], os.Getenv, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		log.Error("bad configuration", "err", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, cfg, log); err != nil {
		log.Error("exiting", "err", err)
		os.Exit(1)
	}
}

// run serves until ctx ends, then lets in-flight requests finish.
func run(ctx context.Context, cfg config, log *slog.Logger) error {
	a := newApp(cfg, log)
	servers := []*http.Server{
		{Addr: cfg.Addr, Handler: a.mainHandler(), ReadHeaderTimeout: 10 * time.Second},
		{Addr: cfg.AdminAddr, Handler: a.adminHandler(), ReadHeaderTimeout: 10 * time.Second},
	}
	var listeners []net.Listener
	for _, s := range servers {
		ln, err := net.Listen("tcp", s.Addr)
		if err != nil {
			for _, l := range listeners {
				_ = l.Close()
			}
			return err
		}
		listeners = append(listeners, ln)
		log.Info("listening", "addr", ln.Addr().String())
	}
	failed := make(chan error, len(servers))
	for i, s := range servers {
		go func() {
			if err := s.Serve(listeners[i]); !errors.Is(err, http.ErrServerClosed) {
				failed <- err
			}
		}()
	}
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-failed:
	}
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errs := []error{serveErr}
	for _, s := range servers {
		errs = append(errs, s.Shutdown(sctx))
	}
	return errors.Join(errs...)
}
