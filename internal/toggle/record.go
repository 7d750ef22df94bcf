package toggle

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// Kinds of toggles; the same strings as perfv1.ToggleSpec.Kind.
const (
	KindEnv       = "env"
	KindJVMOption = "jvmOption"
	KindArgs      = "args"
	KindHTTP      = "http"
	KindExec      = "exec"
)

// JavaToolOptions is the variable a jvmOption toggle merges into. Every HotSpot
// JVM reads it at start-up, whatever launch script the image uses; JAVA_OPTS is
// only a convention of some scripts.
const JavaToolOptions = "JAVA_TOOL_OPTIONS"

// recordVersion is the format version of Record. ParseRecord refuses others: a
// record it does not understand must stall the experiment, not restore the wrong
// thing.
const recordVersion = 1

// Errors the caller maps to conditions; test them with errors.Is.
var (
	// ErrContainerNotFound: the named container is not in the pod template
	// (perfv1.ReasonContainerNotFound).
	ErrContainerNotFound = errors.New("container not found")
	// ErrNotMergeable: JAVA_TOOL_OPTIONS is set with valueFrom, so a jvmOption
	// cannot be merged into it without losing its value.
	ErrNotMergeable = errors.New("cannot merge the JVM option")
	// ErrInvalidRecord: a record is malformed, or belongs to another toggle.
	ErrInvalidRecord = errors.New("invalid toggle record")
	// ErrInvalidSpec: the toggle spec is one admission should have refused
	// (perfv1.ReasonInvalidSpec).
	ErrInvalidSpec = errors.New("invalid toggle spec")
)

// kindError is an error with its own message that still matches a sentinel with
// errors.Is, so messages read naturally ("container \"app\" is not ...") instead
// of repeating the sentinel's text.
type kindError struct {
	msg  string
	kind error
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() error { return e.kind }

func errorf(kind error, format string, args ...any) error {
	return &kindError{msg: fmt.Sprintf(format, args...), kind: kind}
}

// Record is the target's original state for the toggle, captured before any
// change. It is stored as JSON in status.toggle.original and in the Deployment
// annotation perfexp.dev/original, so it can be restored whatever happens to the
// status. Env is set for kinds env and jvmOption, Args for kind args; a record of
// kind http holds neither, because a runtime toggle leaves the template alone (its
// revert is Sender.Revert to status.toggle.pods), but it still marks the target
// the same way, so every kind goes through the same preflight.
type Record struct {
	// Version is the record's format version.
	Version int `json:"version"`
	// Kind is the toggle kind: env, jvmOption, args, http or exec.
	Kind string `json:"kind"`
	// Container is the resolved name of the toggled container, never empty, so
	// the record does not depend on which container is first later on.
	Container string `json:"container"`
	// Env is the original state of the toggled variable (JAVA_TOOL_OPTIONS for
	// jvmOption).
	Env *EnvRecord `json:"env,omitempty"`
	// Args is the container's original args.
	Args *ArgsRecord `json:"args,omitempty"`
}

// EnvRecord is every entry a container's env had for one variable name.
type EnvRecord struct {
	// Name is the variable's name.
	Name string `json:"name"`
	// Entries are the variable's entries with their positions in the env list,
	// in ascending order. Usually zero (absent) or one; the API accepts
	// duplicates, and all of them are restored.
	Entries []EnvEntry `json:"entries,omitempty"`
	// ListNil is true when the env list was nil rather than empty, which JSON
	// cannot tell apart but a Go comparison of the template can.
	ListNil bool `json:"listNil,omitempty"`
}

// EnvEntry is one env entry and its index in the container's env list.
type EnvEntry struct {
	Index int           `json:"index"`
	Var   corev1.EnvVar `json:"var"`
}

// ArgsRecord is a container's original args.
type ArgsRecord struct {
	// Original are the args before the toggle.
	Original []string `json:"original,omitempty"`
	// Nil is true when args was nil rather than empty.
	Nil bool `json:"nil,omitempty"`
}

// original returns a fresh copy of the original args, nil or empty as recorded.
func (a *ArgsRecord) original() []string {
	if a.Nil {
		return nil
	}
	return append([]string{}, a.Original...)
}

// Marshal encodes the record for the annotation and status.toggle.original.
func (r Record) Marshal() (string, error) {
	if err := r.validate(); err != nil {
		return "", err
	}
	b, err := json.Marshal(r)
	if err != nil {
		return "", fmt.Errorf("encoding the toggle record: %w", err)
	}
	return string(b), nil
}

// ParseRecord decodes a record written by Marshal. Unknown fields are ignored, so
// a record written by a newer operator of the same version still restores.
func ParseRecord(s string) (Record, error) {
	if s == "" {
		return Record{}, errorf(ErrInvalidRecord, "the toggle record is empty")
	}
	var r Record
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		return Record{}, errorf(ErrInvalidRecord, "the toggle record is not valid JSON: %v", err)
	}
	if err := r.validate(); err != nil {
		return Record{}, err
	}
	return r, nil
}

// validate checks what Revert relies on, so a damaged record is refused with a
// reason instead of restoring something half-right.
func (r Record) validate() error {
	if r.Version != recordVersion {
		return errorf(ErrInvalidRecord, "the toggle record has version %d; this operator reads version %d", r.Version, recordVersion)
	}
	if r.Container == "" {
		return errorf(ErrInvalidRecord, "the toggle record names no container")
	}
	switch r.Kind {
	case KindEnv, KindJVMOption:
		if r.Env == nil || r.Args != nil {
			return errorf(ErrInvalidRecord, "the %s toggle record must hold env and no args", r.Kind)
		}
		return r.Env.validate(r.Kind)
	case KindArgs:
		if r.Args == nil || r.Env != nil {
			return errorf(ErrInvalidRecord, "the args toggle record must hold args and no env")
		}
		if r.Args.Nil && len(r.Args.Original) > 0 {
			return errorf(ErrInvalidRecord, "the args toggle record says args were nil but lists %d", len(r.Args.Original))
		}
		return nil
	case KindHTTP, KindExec:
		if r.Args != nil || r.Env != nil {
			return errorf(ErrInvalidRecord, "the %s toggle record must hold no env and no args", r.Kind)
		}
		return nil
	}
	return errorf(ErrInvalidRecord, "the toggle record has kind %q; want env, jvmOption, args, http or exec", r.Kind)
}

func (e *EnvRecord) validate(kind string) error {
	if e.Name == "" {
		return errorf(ErrInvalidRecord, "the toggle record names no variable")
	}
	if kind == KindJVMOption && e.Name != JavaToolOptions {
		return errorf(ErrInvalidRecord, "the jvmOption toggle record is for %s, not %s", e.Name, JavaToolOptions)
	}
	if e.ListNil && len(e.Entries) > 0 {
		return errorf(ErrInvalidRecord, "the toggle record says env was nil but lists %d entries", len(e.Entries))
	}
	last := -1
	for _, en := range e.Entries {
		if en.Var.Name != e.Name {
			return errorf(ErrInvalidRecord, "the toggle record for %s holds an entry for %s", e.Name, en.Var.Name)
		}
		if en.Index <= last {
			return errorf(ErrInvalidRecord, "the toggle record's env indices are not ascending")
		}
		last = en.Index
	}
	return nil
}

// captureEnv records every entry of name in the container's env, deep-copied so
// later changes to the template cannot reach the record.
func captureEnv(c *corev1.Container, name string) *EnvRecord {
	rec := &EnvRecord{Name: name, ListNil: c.Env == nil}
	for i := range c.Env {
		if c.Env[i].Name == name {
			rec.Entries = append(rec.Entries, EnvEntry{Index: i, Var: *c.Env[i].DeepCopy()})
		}
	}
	return rec
}

// captureArgs records the container's args.
func captureArgs(c *corev1.Container) *ArgsRecord {
	return &ArgsRecord{Original: slices.Clone(c.Args), Nil: c.Args == nil}
}
