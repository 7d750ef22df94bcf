package main

import "github.com/go-logr/logr"

// lazyValues defers a logger's WithValues until it writes a line.
//
// controller-runtime gives every reconcile a logger with the controller, the
// object and a reconcile ID (seven values), and zap encodes values into a
// buffer of its own as soon as they are added: at N=1000 that was 5 % of the
// manager's allocations (docs/scale.md), for reconciles of which almost none
// writes a line at the default level. Here the values wait with the logger
// and are added, in the same order, when a line is written: what is logged is
// the same.
func lazyValues(l logr.Logger) logr.Logger {
	base := l.GetSink()
	if cd, ok := base.(logr.CallDepthLogSink); ok {
		// The base sink skips logr's frames already; it skips this sink's too.
		base = cd.WithCallDepth(1)
	}
	return logr.New(&lazySink{base: base})
}

type lazySink struct {
	base logr.LogSink
	kv   []any
}

// Init does nothing: the base sink was initialised by its own logger, and
// lazyValues told it about this sink's frame.
func (s *lazySink) Init(logr.RuntimeInfo) {}

func (s *lazySink) Enabled(level int) bool { return s.base.Enabled(level) }

func (s *lazySink) sink() logr.LogSink {
	if len(s.kv) == 0 {
		return s.base
	}
	return s.base.WithValues(s.kv...)
}

func (s *lazySink) Info(level int, msg string, kv ...any) { s.sink().Info(level, msg, kv...) }

func (s *lazySink) Error(err error, msg string, kv ...any) { s.sink().Error(err, msg, kv...) }

func (s *lazySink) WithValues(kv ...any) logr.LogSink {
	// A full slice expression: loggers derived from the same parent never
	// share an appended backing array.
	return &lazySink{base: s.base, kv: append(s.kv[:len(s.kv):len(s.kv)], kv...)}
}

// WithName names the base logger at once: a logger's name and its values are
// independent (zap keeps the name apart from the fields).
func (s *lazySink) WithName(name string) logr.LogSink {
	return &lazySink{base: s.base.WithName(name), kv: s.kv}
}

// WithCallDepth passes the depth on, so the caller reported is still the
// line that logged.
func (s *lazySink) WithCallDepth(depth int) logr.LogSink {
	if cd, ok := s.base.(logr.CallDepthLogSink); ok {
		return &lazySink{base: cd.WithCallDepth(depth), kv: s.kv}
	}
	return s
}
