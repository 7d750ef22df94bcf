package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestParseConfig(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		check   func(config) bool
		wantErr string
	}{
		{name: "defaults", check: func(c config) bool {
			return c == defaultConfig() && c.WorkCPU == 2*time.Millisecond && c.WorkAlloc == 65536 &&
				c.ProfilingOverhead == 0.10 && c.TrackingBytes == 16384 && c.BuffersSize == 64<<20 &&
				c.Addr == ":8080" && c.AdminAddr == ":8081"
		}},
		{name: "env switches", env: map[string]string{"PROFILING": "on", "MEMORY_TRACKING": "true", "BUFFERS": "1"},
			check: func(c config) bool { return c.Profiling && c.MemoryTracking && c.Buffers }},
		{name: "bare flags as the args toggle appends them", args: []string{"--profiling", "--memory-tracking", "-buffers"},
			check: func(c config) bool { return c.Profiling && c.MemoryTracking && c.Buffers }},
		{name: "flag beats env", args: []string{"-profiling=off"}, env: map[string]string{"PROFILING": "on"},
			check: func(c config) bool { return !c.Profiling }},
		{name: "sizes, durations and fractions", args: []string{"-work-cpu=500us", "-work-alloc=1MiB", "-tracking-bytes=4Ki", "-profiling-overhead=25%"},
			env: map[string]string{"BUFFERS_SIZE": "1GiB", "PROFILING_OVERHEAD": "0.5"},
			check: func(c config) bool {
				return c.WorkCPU == 500*time.Microsecond && c.WorkAlloc == 1<<20 && c.TrackingBytes == 4096 &&
					c.ProfilingOverhead == 0.25 && c.BuffersSize == 1<<30
			}},
		{name: "plain byte count", args: []string{"-buffers-size", "1000"}, check: func(c config) bool { return c.BuffersSize == 1000 }},
		{name: "bad env switch", env: map[string]string{"PROFILING": "maybe"},
			wantErr: `environment variable PROFILING="maybe": invalid switch value "maybe": want on|off`},
		{name: "bad flag switch", args: []string{"-memory-tracking=sometimes"},
			wantErr: `invalid boolean value "sometimes" for -memory-tracking: invalid switch value`},
		{name: "bad env size", env: map[string]string{"BUFFERS_SIZE": "lots"},
			wantErr: `environment variable BUFFERS_SIZE="lots": invalid size "lots"`},
		{name: "bad flag size", args: []string{"-work-alloc=-5"}, wantErr: `invalid value "-5" for flag -work-alloc: invalid size`},
		{name: "bad duration", args: []string{"-work-cpu=2"}, wantErr: `invalid value "2" for flag -work-cpu: invalid duration "2": want e.g. 2ms`},
		{name: "env duration out of range", env: map[string]string{"WORK_CPU": "2h"}, wantErr: `environment variable WORK_CPU="2h": duration 2h0m0s out of range`},
		{name: "bad fraction", env: map[string]string{"PROFILING_OVERHEAD": "ten"}, wantErr: `environment variable PROFILING_OVERHEAD="ten": invalid fraction`},
		{name: "unknown flag", args: []string{"-profilling"}, wantErr: `flag provided but not defined: -profilling`},
		{name: "stray argument", args: []string{"on"}, wantErr: `unexpected argument "on"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseConfig(tt.args, func(k string) string { return tt.env[k] }, io.Discard)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tt.check(c) {
				t.Errorf("config %+v", c)
			}
		})
	}
}

func TestAdminEndpoint(t *testing.T) {
	a := testApp(t, func(c *config) { c.BuffersSize = 1 << 20 })
	h := a.adminHandler()
	steps := []struct {
		method, path, body string
		wantCode           int
		wantBody           string
		wantState          map[string]bool
	}{
		{"GET", "/admin/profiling", "", 200, "off\n", map[string]bool{swProfiling: false}},
		{"POST", "/admin/profiling", "on", 200, "profiling=on changed=true", map[string]bool{swProfiling: true}},
		{"POST", "/admin/profiling", "on\n", 200, "profiling=on changed=false", map[string]bool{swProfiling: true}},
		{"GET", "/admin/profiling", "", 200, "on\n", nil},
		{"POST", "/admin/profiling", "OFF", 200, "profiling=off changed=true", map[string]bool{swProfiling: false}},
		{"PUT", "/admin/memory-tracking", "true", 200, "memory-tracking=on", map[string]bool{swMemoryTracking: true}},
		{"POST", "/admin/memory-tracking", "0", 200, "memory-tracking=off", map[string]bool{swMemoryTracking: false}},
		{"POST", "/admin/buffers", "1", 200, "buffers=on", map[string]bool{swBuffers: true}},
		{"POST", "/admin/buffers", "false", 200, "buffers=off", map[string]bool{swBuffers: false}},
		{"POST", "/admin/buffers?state=on", "", 200, "buffers=on", map[string]bool{swBuffers: true}},
		{"POST", "/admin/buffers?enabled=false", "", 200, "buffers=off", map[string]bool{swBuffers: false}},
		{"GET", "/admin", "", 200, "profiling=off\nmemory-tracking=off\nbuffers=off\n", nil},
		// Refusals leave the state alone and say what is wanted.
		{"POST", "/admin/profiling", "maybe", 400, `profiling: invalid switch value "maybe": want on|off (or true|false, 1|0)`, map[string]bool{swProfiling: false}},
		{"POST", "/admin/profiling", "", 400, "missing value: send body on or off", nil},
		{"POST", "/admin/profiling", strings.Repeat("x", 2000), 400, "body too large", nil},
		{"POST", "/admin/tracing", "on", 404, `unknown switch "tracing": want one of profiling, memory-tracking, buffers`, nil},
		{"DELETE", "/admin/profiling", "", 405, "method DELETE not allowed", nil},
	}
	for _, s := range steps {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(s.method, s.path, strings.NewReader(s.body)))
		body := rec.Body.String()
		if rec.Code != s.wantCode || !strings.Contains(body, s.wantBody) {
			t.Errorf("%s %s %.20q: %d %q, want %d containing %q", s.method, s.path, s.body, rec.Code, body, s.wantCode, s.wantBody)
		}
		for name, want := range s.wantState {
			if got, _ := a.state(name); got != want {
				t.Errorf("%s %s %.20q: %s is %v, want %v", s.method, s.path, s.body, name, got, want)
			}
		}
	}
}

func TestMetricsExportWhatTheOperatorQueries(t *testing.T) {
	a := testApp(t, func(c *config) { c.WorkCPU = 0; c.Profiling = true })
	h := a.mainHandler()
	for _, p := range []string{"/work", "/", "/healthz"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, p, nil))
		if rec.Code != http.StatusOK {
			t.Fatalf("GET %s: %d", p, rec.Code)
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body := rec.Body.String()
	for _, want := range []string{
		"\ngo_memstats_heap_alloc_bytes ", // internal/metrics' default Go heap query
		"\ngo_memstats_heap_inuse_bytes ",
		"\nprocess_cpu_seconds_total ",
		`toy_switch_enabled{switch="profiling"} 1`,
		`toy_switch_enabled{switch="memory-tracking"} 0`,
		`toy_switch_enabled{switch="buffers"} 0`,
		`toy_requests_total{code="200"} 2`,
		"toy_request_duration_seconds_count 2",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

func TestRunShutsDownWhenCancelled(t *testing.T) {
	c := defaultConfig()
	c.Addr, c.AdminAddr = "127.0.0.1:0", "127.0.0.1:0"
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, c, slog.New(slog.NewTextHandler(io.Discard, nil))) }()
	time.Sleep(50 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run returned %v after cancel, want nil", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("run did not return after cancel")
	}
}
