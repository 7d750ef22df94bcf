// Command ociimage writes a container image archive of local files on an empty
// base, without Docker or a registry:
//
//	ociimage -o OUT.tar -name REF [-format docker|oci] [-entrypoint /path] [-arg X]...
//	         [-env K=V]... [-user 65532:65532] [-workdir /] SRC=DEST [SRC=DEST ...]
//
// The image has one layer holding each SRC at DEST (parents created, mode 0755
// when SRC is executable else 0644, owned by root) and an empty /tmp (1777); it
// is linux/amd64 with every timestamp at the epoch, so the same inputs give the
// same bytes. The default docker-archive format is what docker load and
// ctr images import read; -format oci writes an OCI layout archive whose index
// names the image with the io.containerd.image.name annotation.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "ociimage:", err)
		}
		os.Exit(2)
	}
}

// listFlag collects a repeatable flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

// parseArgs turns the command line into a spec; every error names the argument.
func parseArgs(args []string, stderr io.Writer) (spec, error) {
	var s spec
	var argv, env, layers listFlag
	fs := flag.NewFlagSet("ociimage", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&s.out, "o", "", "output archive `OUT.tar` (required)")
	fs.StringVar(&s.ref, "name", "", "image reference `REF`, e.g. perfexp.dev/toy:dev (required)")
	fs.StringVar(&s.format, "format", "docker", "archive format: docker (docker-archive) or oci (OCI layout archive)")
	fs.StringVar(&s.entrypoint, "entrypoint", "", "entrypoint `/path` in the image")
	fs.Var(&argv, "arg", "an argument after the entrypoint (the image's Cmd); repeatable")
	fs.Var(&env, "env", "an environment variable `K=V`; repeatable")
	fs.Var(&layers, "layer", "a tar `FILE` added as a layer below the files (a root filesystem, say); repeatable, bottom first")
	fs.StringVar(&s.user, "user", "", "user the process runs as, e.g. 65532:65532 (default root)")
	fs.StringVar(&s.workdir, "workdir", "/", "working directory")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: ociimage -o OUT.tar -name REF [-format docker|oci] [-layer FILE.tar]... [-entrypoint /path] [-arg X]... [-env K=V]... [-user UID:GID] [-workdir /] SRC=DEST [SRC=DEST ...]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return s, err
	}
	s.args, s.env, s.layers = argv, env, layers
	for _, l := range s.layers {
		if st, err := os.Stat(l); err != nil {
			return s, fmt.Errorf("-layer %q: %w", l, err)
		} else if !st.Mode().IsRegular() {
			return s, fmt.Errorf("-layer %q: not a regular file (want a tar)", l)
		}
	}
	switch {
	case s.out == "":
		return s, errors.New("missing -o OUT.tar: where to write the archive")
	case s.ref == "":
		return s, errors.New("missing -name REF: the image's name, e.g. perfexp.dev/toy:dev")
	case s.format != "docker" && s.format != "oci":
		return s, fmt.Errorf("-format %q: want docker or oci", s.format)
	case s.entrypoint != "" && !path.IsAbs(s.entrypoint):
		return s, fmt.Errorf("-entrypoint %q: must be an absolute path in the image", s.entrypoint)
	case !path.IsAbs(s.workdir):
		return s, fmt.Errorf("-workdir %q: must be an absolute path", s.workdir)
	}
	if _, err := name.NewTag(s.ref); err != nil {
		return s, fmt.Errorf("-name %q: %w", s.ref, err)
	}
	for _, e := range s.env {
		if k, _, ok := strings.Cut(e, "="); !ok || k == "" {
			return s, fmt.Errorf("-env %q: want K=V", e)
		}
	}
	if fs.NArg() == 0 {
		return s, errors.New("no files: give at least one SRC=DEST, e.g. bin/toy=/toy")
	}
	for _, a := range fs.Args() {
		f, err := parseFile(a)
		if err != nil {
			return s, err
		}
		s.files = append(s.files, f)
	}
	return s, nil
}

func run(args []string, stderr io.Writer) error {
	s, err := parseArgs(args, stderr)
	if err != nil {
		return err
	}
	img, err := buildImage(s)
	if err != nil {
		return err
	}
	// Write next to OUT and rename, so a failed run never leaves half an archive.
	if err := os.MkdirAll(filepath.Dir(s.out), 0o755); err != nil {
		return fmt.Errorf("-o %s: %w", s.out, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(s.out), ".ociimage-*")
	if err != nil {
		return fmt.Errorf("-o %s: %w", s.out, err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if err := writeArchive(tmp, s, img); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("writing %s: %w", s.out, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), s.out)
}
