package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"os"
	"path"
	"slices"
	"strings"
	"time"
)

// epoch is every timestamp the image carries, so the same inputs give the same bytes.
var epoch = time.Unix(0, 0).UTC()

// file is one SRC=DEST argument.
type file struct {
	src, dest string
}

// parseFile splits and checks one SRC=DEST argument; errors quote the argument.
func parseFile(arg string) (file, error) {
	src, dest, ok := strings.Cut(arg, "=")
	if !ok || src == "" || dest == "" {
		return file{}, fmt.Errorf("file argument %q: want SRC=DEST, e.g. bin/toy=/toy", arg)
	}
	if !path.IsAbs(dest) {
		return file{}, fmt.Errorf("file argument %q: DEST %q must be an absolute path in the image", arg, dest)
	}
	clean := path.Clean(dest)
	if clean == "/" {
		return file{}, fmt.Errorf("file argument %q: DEST must name a file, not /", arg)
	}
	st, err := os.Stat(src)
	if err != nil {
		return file{}, fmt.Errorf("file argument %q: SRC: %w", arg, err)
	}
	if !st.Mode().IsRegular() {
		return file{}, fmt.Errorf("file argument %q: SRC %q is not a regular file", arg, src)
	}
	return file{src: src, dest: clean}, nil
}

// entry is one tar entry before it is written; name has no leading slash.
type entry struct {
	name string
	dir  bool
	mode int64
	src  string
}

// layerTar builds the image's only layer: each file at its DEST with its parent
// directories, and /tmp with mode 1777 (k6 and most programs want a writable
// temp dir). Entries are sorted, owned by root and dated at the epoch.
func layerTar(files []file) ([]byte, error) {
	entries := map[string]entry{"tmp": {name: "tmp", dir: true, mode: 0o1777}}
	for _, f := range files {
		name := strings.TrimPrefix(f.dest, "/")
		if prev, ok := entries[name]; ok {
			if prev.dir {
				return nil, fmt.Errorf("DEST %s is a directory in the image (a parent of another DEST, or /tmp)", f.dest)
			}
			return nil, fmt.Errorf("DEST %s given twice (from %s and %s)", f.dest, prev.src, f.src)
		}
		st, err := os.Stat(f.src)
		if err != nil {
			return nil, err
		}
		mode := int64(0o644)
		if st.Mode().Perm()&0o111 != 0 {
			mode = 0o755
		}
		entries[name] = entry{name: name, mode: mode, src: f.src}
		for dir := path.Dir(name); dir != "."; dir = path.Dir(dir) {
			if prev, ok := entries[dir]; ok && !prev.dir {
				return nil, fmt.Errorf("DEST %s would need %s to be a directory, but it is a file from %s", f.dest, "/"+dir, prev.src)
			}
			if _, ok := entries[dir]; !ok {
				entries[dir] = entry{name: dir, dir: true, mode: 0o755}
			}
		}
	}
	names := make([]string, 0, len(entries))
	for n := range entries {
		names = append(names, n)
	}
	slices.Sort(names) // a parent sorts before its children

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, n := range names {
		e := entries[n]
		hdr := &tar.Header{
			Name:    e.name,
			Mode:    e.mode,
			ModTime: epoch,
			Format:  tar.FormatPAX, // long names; with epoch times no PAX records are needed
		}
		var data []byte
		if e.dir {
			hdr.Typeflag, hdr.Name = tar.TypeDir, e.name+"/"
		} else {
			var err error
			if data, err = os.ReadFile(e.src); err != nil {
				return nil, err
			}
			hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(data))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("layer entry %s: %w", hdr.Name, err)
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
