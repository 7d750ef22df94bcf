package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// config is everything the toy reads at start-up. Every field can be set by an
// environment variable and overridden by a command-line flag, so each of the
// operator's toggle kinds (env, args, http) has something to act on.
type config struct {
	Addr      string
	AdminAddr string

	WorkCPU   time.Duration // CPU time burnt per request
	WorkAlloc int64         // bytes allocated and dropped per request

	Profiling         bool
	ProfilingOverhead float64 // extra CPU per request while profiling, as a fraction of WorkCPU

	MemoryTracking bool
	TrackingBytes  int64 // bytes retained per request while tracking

	Buffers     bool
	BuffersSize int64 // bytes held while buffers are on
}

func defaultConfig() config {
	return config{
		Addr:              ":8080",
		AdminAddr:         ":8081",
		WorkCPU:           2 * time.Millisecond,
		WorkAlloc:         64 << 10,
		ProfilingOverhead: 0.10,
		TrackingBytes:     16 << 10,
		BuffersSize:       64 << 20,
	}
}

// option ties one config field to its flag name, environment variable and parser.
type option struct {
	flag, env, usage string
	value            flag.Value
}

func options(c *config) []option {
	return []option{
		{"addr", "ADDR", "main listen address (/work, /metrics, /healthz)", (*stringValue)(&c.Addr)},
		{"admin-addr", "ADMIN_ADDR", "admin listen address (/admin/<switch>)", (*stringValue)(&c.AdminAddr)},
		{"work-cpu", "WORK_CPU", "CPU time burnt per request (thread CPU clock, not wall time)", (*durationValue)(&c.WorkCPU)},
		{"work-alloc", "WORK_ALLOC", "bytes allocated and dropped per request (e.g. 64KiB)", (*bytesValue)(&c.WorkAlloc)},
		{"profiling", "PROFILING", "start with profiling on (on|off)", (*switchValue)(&c.Profiling)},
		{"profiling-overhead", "PROFILING_OVERHEAD", "extra CPU per request while profiling, as a fraction of -work-cpu (0.10 or 10%)", (*fractionValue)(&c.ProfilingOverhead)},
		{"memory-tracking", "MEMORY_TRACKING", "start with memory tracking on (on|off): retains -tracking-bytes per request", (*switchValue)(&c.MemoryTracking)},
		{"tracking-bytes", "TRACKING_BYTES", "bytes retained per request while memory tracking is on", (*bytesValue)(&c.TrackingBytes)},
		{"buffers", "BUFFERS", "start with buffers on (on|off): holds -buffers-size resident", (*switchValue)(&c.Buffers)},
		{"buffers-size", "BUFFERS_SIZE", "bytes held while buffers are on (e.g. 64MiB)", (*bytesValue)(&c.BuffersSize)},
	}
}

// parseConfig reads the environment first and the flags second, so a flag wins.
// Errors name the flag or variable and the accepted values.
func parseConfig(args []string, getenv func(string) string, usage io.Writer) (config, error) {
	c := defaultConfig()
	opts := options(&c)
	fs := flag.NewFlagSet("toy", flag.ContinueOnError)
	fs.SetOutput(usage)
	for _, o := range opts {
		if v := getenv(o.env); v != "" {
			if err := o.value.Set(v); err != nil {
				return c, fmt.Errorf("environment variable %s=%q: %w", o.env, v, err)
			}
		}
		fs.Var(o.value, o.flag, o.usage+" (env "+o.env+")")
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q (every setting is a -flag)", fs.Arg(0))
	}
	return c, nil
}

// parseSwitch accepts the words an operator's toggle is likely to send.
func parseSwitch(s string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "on", "true", "1", "yes", "enable", "enabled":
		return true, nil
	case "off", "false", "0", "no", "disable", "disabled":
		return false, nil
	}
	return false, fmt.Errorf("invalid switch value %q: want on|off (or true|false, 1|0)", s)
}

func switchString(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// switchValue is a boolean flag that also takes on/off, so "-profiling",
// "--profiling=on" and "-profiling=false" all work.
type switchValue bool

func (v *switchValue) String() string   { return switchString(bool(*v)) }
func (v *switchValue) IsBoolFlag() bool { return true }
func (v *switchValue) Set(s string) error {
	b, err := parseSwitch(s)
	*v = switchValue(b)
	return err
}

type stringValue string

func (v *stringValue) String() string { return string(*v) }
func (v *stringValue) Set(s string) error {
	if s == "" {
		return errors.New("must not be empty")
	}
	*v = stringValue(s)
	return nil
}

type durationValue time.Duration

func (v *durationValue) String() string { return time.Duration(*v).String() }
func (v *durationValue) Set(s string) error {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return fmt.Errorf("invalid duration %q: want e.g. 2ms or 500us", s)
	}
	if d < 0 || d > time.Minute {
		return fmt.Errorf("duration %s out of range: want 0 to 1m", d)
	}
	*v = durationValue(d)
	return nil
}

// fractionValue takes 0.1 or 10%.
type fractionValue float64

func (v *fractionValue) String() string { return strconv.FormatFloat(float64(*v), 'g', -1, 64) }
func (v *fractionValue) Set(s string) error {
	t := strings.TrimSpace(s)
	scale := 1.0
	if strings.HasSuffix(t, "%") {
		t, scale = strings.TrimSuffix(t, "%"), 0.01
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(f) {
		return fmt.Errorf("invalid fraction %q: want e.g. 0.10 or 10%%", s)
	}
	f *= scale
	if f < 0 || f > 100 {
		return fmt.Errorf("fraction %q out of range: want 0 to 100 (0%% to 10000%%)", s)
	}
	*v = fractionValue(f)
	return nil
}

// bytesValue takes a plain byte count or a binary (KiB, MiB, GiB; Ki, K) or
// decimal (kB, MB, GB) suffix.
type bytesValue int64

func (v *bytesValue) String() string { return strconv.FormatInt(int64(*v), 10) }
func (v *bytesValue) Set(s string) error {
	n, err := parseBytes(s)
	if err != nil {
		return err
	}
	*v = bytesValue(n)
	return nil
}

var byteUnits = []struct {
	suffix string
	mult   int64
}{
	// Longest suffixes first so "KiB" is not read as "B".
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30},
	{"kB", 1e3}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9},
	{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30},
	{"K", 1 << 10}, {"k", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30},
	{"B", 1},
}

func parseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range byteUnits {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("invalid size %q: want a byte count such as 65536, 64KiB or 64MiB", s)
	}
	if n > (16<<30)/mult {
		return 0, fmt.Errorf("size %q too large: at most 16GiB", s)
	}
	return n * mult, nil
}
