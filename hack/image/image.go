package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// spec is what the command line asks for.
type spec struct {
	out, ref, format string
	entrypoint       string
	args, env        []string
	user, workdir    string
	files            []file
	layers           []string // tar files below the files' layer, bottom first
}

// buildImage assembles a linux/amd64 image on an empty base: the -layer tars,
// bottom first, then one layer with the files. The media
// types follow the archive format: Docker's for docker-archive (what docker load
// expects), OCI's for an OCI archive.
func buildImage(s spec) (v1.Image, error) {
	layerBytes, err := layerTar(s.files)
	if err != nil {
		return nil, err
	}
	manifestType, configType, layerType := types.DockerManifestSchema2, types.DockerConfigJSON, types.DockerLayer
	if s.format == "oci" {
		manifestType, configType, layerType = types.OCIManifestSchema1, types.OCIConfigJSON, types.OCILayer
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerBytes)), nil
	}, tarball.WithMediaType(layerType))
	if err != nil {
		return nil, err
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, manifestType), configType)
	for _, path := range s.layers {
		l, err := tarball.LayerFromFile(path, tarball.WithMediaType(layerType))
		if err != nil {
			return nil, fmt.Errorf("-layer %s: %w", path, err)
		}
		base, err = mutate.Append(base, mutate.Addendum{
			Layer:   l,
			History: v1.History{Created: v1.Time{Time: epoch}, CreatedBy: "ociimage -layer", Comment: filepath.Base(path)},
		})
		if err != nil {
			return nil, err
		}
	}
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:   layer,
		History: v1.History{Created: v1.Time{Time: epoch}, CreatedBy: "ociimage", Comment: strings.Join(dests(s.files), " ")},
	})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Created = v1.Time{Time: epoch}
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config = v1.Config{
		Cmd:        s.args,
		Env:        s.env,
		User:       s.user,
		WorkingDir: s.workdir,
	}
	if s.entrypoint != "" {
		cf.Config.Entrypoint = []string{s.entrypoint}
	}
	return mutate.ConfigFile(img, cf)
}

func dests(files []file) []string {
	out := make([]string, len(files))
	for i, f := range files {
		out[i] = f.dest
	}
	return out
}

// writeArchive writes the image as a docker-archive (manifest.json with
// RepoTags) or an OCI image layout archive whose index carries the
// io.containerd.image.name annotation. ctr -n k8s.io images import takes both.
func writeArchive(w io.Writer, s spec, img v1.Image) error {
	tag, err := name.NewTag(s.ref)
	if err != nil {
		return err
	}
	if s.format == "oci" {
		return writeOCI(w, containerdName(tag), img)
	}
	return tarball.Write(tag, img, w)
}

// containerdName is the fully qualified name containerd (and the kubelet)
// stores an image under: grafana/k6:1.8.1 → docker.io/grafana/k6:1.8.1,
// pause:3.10 → docker.io/library/pause:3.10, perfexp.dev/toy:dev unchanged.
func containerdName(tag name.Tag) string {
	repo := tag.RepositoryStr()
	reg := tag.RegistryStr()
	if reg == name.DefaultRegistry {
		reg = "docker.io"
	}
	return reg + "/" + repo + ":" + tag.TagStr()
}

// writeOCI writes an OCI image layout as a tar: oci-layout, index.json and the
// blobs, in a fixed order with epoch times.
func writeOCI(w io.Writer, ref string, img v1.Image) error {
	desc, err := partial.Descriptor(img)
	if err != nil {
		return err
	}
	desc.ArtifactType = "" // partial.Descriptor fills it in; a plain image has none
	desc.Platform = &v1.Platform{OS: "linux", Architecture: "amd64"}
	desc.Annotations = map[string]string{
		"io.containerd.image.name":          ref,
		"org.opencontainers.image.ref.name": ref,
	}
	index, err := json.Marshal(v1.IndexManifest{
		SchemaVersion: 2,
		MediaType:     types.OCIImageIndex,
		Manifests:     []v1.Descriptor{*desc},
	})
	if err != nil {
		return err
	}
	manifest, err := img.RawManifest()
	if err != nil {
		return err
	}
	config, err := img.RawConfigFile()
	if err != nil {
		return err
	}
	configName, err := img.ConfigName()
	if err != nil {
		return err
	}
	blobs := map[string][]byte{desc.Digest.Hex: manifest, configName.Hex: config}
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return err
		}
		rc, err := l.Compressed()
		if err != nil {
			return err
		}
		b, err := io.ReadAll(rc)
		_ = rc.Close()
		if err != nil {
			return err
		}
		blobs[d.Hex] = b
	}

	tw := tar.NewWriter(w)
	write := func(n string, b []byte) error {
		hdr := &tar.Header{Name: n, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(b)), ModTime: epoch, Format: tar.FormatPAX}
		if strings.HasSuffix(n, "/") {
			hdr.Typeflag, hdr.Mode = tar.TypeDir, 0o755
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		_, err := tw.Write(b)
		return err
	}
	names := []string{"blobs/", "blobs/sha256/"}
	for _, h := range slices.Sorted(maps.Keys(blobs)) {
		names = append(names, "blobs/sha256/"+h)
	}
	names = append(names, "index.json", "oci-layout")
	for _, n := range names {
		var b []byte
		switch {
		case n == "index.json":
			b = index
		case n == "oci-layout":
			b = []byte(`{"imageLayoutVersion":"1.0.0"}`)
		case strings.HasPrefix(n, "blobs/sha256/") && n != "blobs/sha256/":
			b = blobs[strings.TrimPrefix(n, "blobs/sha256/")]
		}
		if err := write(n, b); err != nil {
			return err
		}
	}
	return tw.Close()
}
