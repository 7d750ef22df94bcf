package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// fixture writes an executable and a data file and returns their paths.
func fixture(t *testing.T) (exe, data string) {
	t.Helper()
	dir := t.TempDir()
	exe, data = filepath.Join(dir, "app"), filepath.Join(dir, "app.conf")
	if err := os.WriteFile(exe, []byte("#!binary\x00payload"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(data, []byte("key=value\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return exe, data
}

func build(t *testing.T, args ...string) {
	t.Helper()
	var stderr bytes.Buffer
	if err := run(args, &stderr); err != nil {
		t.Fatalf("ociimage %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
}

func sha(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

type tarEntry struct {
	name    string
	typ     byte
	mode    int64
	uid     int
	gid     int
	mtime   int64
	content string
}

func layerEntries(t *testing.T, img v1.Image) []tarEntry {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Fatalf("%d layers, want 1", len(layers))
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var out []tarEntry
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		out = append(out, tarEntry{h.Name, h.Typeflag, h.Mode, h.Uid, h.Gid, h.ModTime.Unix(), string(b)})
	}
}

func checkImage(t *testing.T, img v1.Image) {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if !slices.Equal(c.Entrypoint, []string{"/usr/local/bin/app"}) || !slices.Equal(c.Cmd, []string{"serve", "--port=8080"}) ||
		!slices.Equal(c.Env, []string{"A=1", "PATH=/usr/local/bin"}) || c.User != "65532:65532" || c.WorkingDir != "/work" {
		t.Errorf("config %+v", c)
	}
	if cf.OS != "linux" || cf.Architecture != "amd64" || cf.Created.Unix() != 0 {
		t.Errorf("os %s arch %s created %s", cf.OS, cf.Architecture, cf.Created)
	}
	want := []tarEntry{
		{"etc/", tar.TypeDir, 0o755, 0, 0, 0, ""},
		{"etc/app.conf", tar.TypeReg, 0o644, 0, 0, 0, "key=value\n"},
		{"tmp/", tar.TypeDir, 0o1777, 0, 0, 0, ""},
		{"usr/", tar.TypeDir, 0o755, 0, 0, 0, ""},
		{"usr/local/", tar.TypeDir, 0o755, 0, 0, 0, ""},
		{"usr/local/bin/", tar.TypeDir, 0o755, 0, 0, 0, ""},
		{"usr/local/bin/app", tar.TypeReg, 0o755, 0, 0, 0, "#!binary\x00payload"},
	}
	if got := layerEntries(t, img); !slices.Equal(got, want) {
		t.Errorf("layer entries\n got %+v\nwant %+v", got, want)
	}
}

func imageArgs(out, format, exe, data string) []string {
	return []string{"-o", out, "-name", "perfexp.dev/toy:dev", "-format", format,
		"-entrypoint", "/usr/local/bin/app", "-arg", "serve", "-arg", "--port=8080",
		"-env", "A=1", "-env", "PATH=/usr/local/bin", "-user", "65532:65532", "-workdir", "/work",
		exe + "=/usr/local/bin/app", data + "=/etc/app.conf"}
}

func TestDockerArchive(t *testing.T) {
	exe, data := fixture(t)
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.tar"), filepath.Join(dir, "sub", "b.tar")
	build(t, imageArgs(a, "docker", exe, data)...)
	build(t, imageArgs(b, "docker", exe, data)...)
	if sa, sb := sha(t, a), sha(t, b); sa != sb {
		t.Errorf("two builds of the same inputs differ: %s vs %s", sa, sb)
	} else {
		t.Logf("docker-archive reproducible: sha256 %s", sa)
	}

	tag, _ := name.NewTag("perfexp.dev/toy:dev")
	img, err := tarball.ImageFromPath(a, &tag)
	if err != nil {
		t.Fatal(err)
	}
	checkImage(t, img)
	m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(a) })
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 1 || !slices.Equal(m[0].RepoTags, []string{"perfexp.dev/toy:dev"}) {
		t.Errorf("manifest.json %+v, want RepoTags [perfexp.dev/toy:dev]", m)
	}
}

func TestOCIArchive(t *testing.T) {
	exe, data := fixture(t)
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.tar"), filepath.Join(dir, "b.tar")
	build(t, imageArgs(a, "oci", exe, data)...)
	build(t, imageArgs(b, "oci", exe, data)...)
	if sa, sb := sha(t, a), sha(t, b); sa != sb {
		t.Errorf("two builds of the same inputs differ: %s vs %s", sa, sb)
	}

	// Unpack the archive into a layout directory and read it back the way
	// tools that take OCI layouts do.
	lp := filepath.Join(dir, "layout")
	f, err := os.Open(a)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(lp, h.Name)
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		b, _ := io.ReadAll(tr)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	idx, err := layout.ImageIndexFromPath(lp)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 || im.Manifests[0].Annotations["io.containerd.image.name"] != "perfexp.dev/toy:dev" {
		t.Fatalf("index %+v, want one manifest named perfexp.dev/toy:dev", im)
	}
	if d := im.Manifests[0]; d.ArtifactType != "" || d.Platform == nil || d.Platform.OS != "linux" || d.Platform.Architecture != "amd64" {
		t.Errorf("index descriptor %+v, want linux/amd64 and no artifactType", d)
	}
	img, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	if mt, _ := img.MediaType(); mt != "application/vnd.oci.image.manifest.v1+json" {
		t.Errorf("manifest media type %s", mt)
	}
	checkImage(t, img)
}

func TestContainerdName(t *testing.T) {
	for in, want := range map[string]string{
		"grafana/k6:1.8.1":             "docker.io/grafana/k6:1.8.1",
		"pause:3.10":                   "docker.io/library/pause:3.10",
		"perfexp.dev/toy:dev":          "perfexp.dev/toy:dev",
		"localhost:5000/a/b:c":         "localhost:5000/a/b:c",
		"perfexp.dev/perf-operator":    "perfexp.dev/perf-operator:latest",
		"docker.io/library/alpine:3":   "docker.io/library/alpine:3",
		"index.docker.io/grafana/k6:1": "docker.io/grafana/k6:1",
	} {
		tag, err := name.NewTag(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := containerdName(tag); got != want {
			t.Errorf("containerdName(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestBadArguments(t *testing.T) {
	exe, _ := fixture(t)
	out := filepath.Join(t.TempDir(), "x.tar")
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"-name", "a:b", exe + "=/a"}, "missing -o OUT.tar"},
		{[]string{"-o", out, exe + "=/a"}, "missing -name REF"},
		{[]string{"-o", out, "-name", "UPPER:x", exe + "=/a"}, `-name "UPPER:x"`},
		{[]string{"-o", out, "-name", "a:b", "-format", "zip", exe + "=/a"}, `-format "zip": want docker or oci`},
		{[]string{"-o", out, "-name", "a:b", "-entrypoint", "app", exe + "=/a"}, `-entrypoint "app": must be an absolute path`},
		{[]string{"-o", out, "-name", "a:b", "-env", "NOVALUE", exe + "=/a"}, `-env "NOVALUE": want K=V`},
		{[]string{"-o", out, "-name", "a:b"}, "no files: give at least one SRC=DEST"},
		{[]string{"-o", out, "-name", "a:b", "/nonexistent/app=/app"}, `file argument "/nonexistent/app=/app": SRC: stat /nonexistent/app: no such file`},
		{[]string{"-o", out, "-name", "a:b", exe + "=app"}, `DEST "app" must be an absolute path`},
		{[]string{"-o", out, "-name", "a:b", exe}, "want SRC=DEST"},
		{[]string{"-o", out, "-name", "a:b", filepath.Dir(exe) + "=/d"}, "is not a regular file"},
		{[]string{"-o", out, "-name", "a:b", exe + "=/a", exe + "=/a"}, "DEST /a given twice"},
		{[]string{"-o", out, "-name", "a:b", exe + "=/a", exe + "=/a/b"}, "DEST /a/b would need /a to be a directory"},
		{[]string{"-o", out, "-name", "a:b", exe + "=/tmp"}, "DEST /tmp is a directory in the image"},
	}
	for _, tt := range tests {
		err := run(tt.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ociimage %s: error %v, want it to contain %q", strings.Join(tt.args, " "), err, tt.want)
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a failed run left %s behind", out)
	}
}

// A -layer tar goes below the files' layer, byte for byte, so a root
// filesystem (the JVM base) and an app's files make one image.
func TestBaseLayer(t *testing.T) {
	exe, _ := fixture(t)
	dir := t.TempDir()
	base := filepath.Join(dir, "rootfs.tar")
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range []struct{ name, body string }{{"etc/os-release", "ID=debian\n"}, {"usr/bin/java", "#!jvm"}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o755, Size: int64(len(f.body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		_, _ = tw.Write([]byte(f.body))
	}
	_ = tw.Close()
	if err := os.WriteFile(base, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "img.tar")
	build(t, "-o", out, "-name", "perfexp.dev/jvm-app:dev", "-layer", base, "-entrypoint", "/usr/bin/java", exe+"=/app/app.jar")
	tag, _ := name.NewTag("perfexp.dev/jvm-app:dev")
	img, err := tarball.ImageFromPath(out, &tag)
	if err != nil {
		t.Fatal(err)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 2 {
		t.Fatalf("%d layers (%v), want the base and the files", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(rc)
	if !bytes.Equal(got, buf.Bytes()) {
		t.Error("the bottom layer is not the -layer tar byte for byte")
	}
	var names []string
	rc, _ = layers[1].Uncompressed()
	tr := tar.NewReader(rc)
	for h, err := tr.Next(); err == nil; h, err = tr.Next() {
		names = append(names, h.Name)
	}
	if !slices.Contains(names, "app/app.jar") {
		t.Errorf("top layer holds %q, want app/app.jar", names)
	}

	var stderr bytes.Buffer
	if err := run([]string{"-o", out, "-name", "x/y:z", "-layer", filepath.Join(dir, "missing.tar"), exe + "=/a"}, &stderr); err == nil || !strings.Contains(err.Error(), "-layer") {
		t.Errorf("missing -layer file: %v", err)
	}
}
