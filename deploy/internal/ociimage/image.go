package ociimage

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Labels are the OCI annotations of the image of s.
func (s Spec) Labels(b Build) map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":       s.Name,
		"org.opencontainers.image.description": s.Description,
		"org.opencontainers.image.version":     b.Version,
		"org.opencontainers.image.revision":    b.Commit,
		"org.opencontainers.image.created":     b.Created.UTC().Format("2006-01-02T15:04:05Z"),
		"org.opencontainers.image.source":      Source,
		"org.opencontainers.image.licenses":    License,
	}
}

// Entrypoint is the image's entrypoint: the binary.
func (s Spec) Entrypoint() []string { return []string{path.Join(BinDir, s.Name)} }

// User is the image's user, numeric so that it needs no lookup.
func User() string { return fmt.Sprintf("%d:%d", UID, GID) }

// Tags are the image's references: statecast/<name>:<version> and :latest.
func (s Spec) Tags(b Build) ([]name.Tag, error) {
	var out []name.Tag
	for _, t := range []string{tagOf(b.Version), "latest"} {
		tag, err := name.NewTag(Repository + "/" + s.Name + ":" + t)
		if err != nil {
			return nil, err
		}
		out = append(out, tag)
	}
	return out, nil
}

// tagOf makes a version a valid image tag (semver build metadata's "+" is not).
func tagOf(v string) string { return strings.ReplaceAll(v, "+", "-") }

// files are what the layer holds besides the binary: the user's entries (a process that
// looks its user up finds it) and a writable /tmp.
var files = []struct {
	name string
	mode int64
	body string
	uid  int
	dir  bool
}{
	{name: "etc/", mode: 0o755, dir: true},
	{name: "etc/passwd", mode: 0o644, body: "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"},
	{name: "etc/group", mode: 0o644, body: "root:x:0:\nnonroot:x:65532:\n"},
	{name: "home/", mode: 0o755, dir: true},
	{name: "home/nonroot/", mode: 0o700, dir: true, uid: UID},
	{name: "tmp/", mode: 0o1777, dir: true},
	{name: "usr/", mode: 0o755, dir: true},
	{name: "usr/local/", mode: 0o755, dir: true},
	{name: "usr/local/bin/", mode: 0o755, dir: true},
}

// Layer is the image's only layer: the binary (its bytes) at BinDir/<Name> and files.
func (s Spec) Layer(binary []byte, b Build) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	hdr := func(h *tar.Header) error {
		h.ModTime = b.Created
		h.Format = tar.FormatPAX
		return tw.WriteHeader(h)
	}
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, Uid: f.uid, Gid: f.uid, Typeflag: tar.TypeReg, Size: int64(len(f.body))}
		if f.dir {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if err := hdr(h); err != nil {
			return nil, err
		}
		if _, err := io.WriteString(tw, f.body); err != nil {
			return nil, err
		}
	}
	bin := strings.TrimPrefix(path.Join(BinDir, s.Name), "/")
	if err := hdr(&tar.Header{Name: bin, Mode: 0o755, Typeflag: tar.TypeReg, Size: int64(len(binary))}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(binary); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
		tarball.WithMediaType(types.OCILayer))
}

// Image assembles the image of s around binary: an empty base, one layer, and the
// config (entrypoint, default arguments, non-root user, exposed ports, labels).
func (s Spec) Image(binary []byte, b Build) (v1.Image, error) {
	layer, err := s.Layer(binary, b)
	if err != nil {
		return nil, err
	}
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{Layer: layer, MediaType: types.OCILayer,
		History: v1.History{CreatedBy: "statecast make images: " + s.Package, Created: v1.Time{Time: b.Created}}})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", b.arch()
	cf.Created = v1.Time{Time: b.Created}
	cf.Config = v1.Config{
		Entrypoint: s.Entrypoint(),
		Cmd:        s.Cmd,
		User:       User(),
		WorkingDir: "/",
		Env:        []string{"PATH=" + BinDir, "HOME=/home/nonroot"},
		Labels:     s.Labels(b),
	}
	if len(s.Ports) > 0 {
		cf.Config.ExposedPorts = map[string]struct{}{}
		for _, p := range s.Ports {
			cf.Config.ExposedPorts[strconv.Itoa(p)+"/tcp"] = struct{}{}
		}
	}
	return mutate.ConfigFile(img, cf)
}

// WriteTarball writes img to path as a tarball that `docker load` reads, under tags.
func WriteTarball(path string, img v1.Image, tags []name.Tag) error {
	refs := map[name.Reference]v1.Image{}
	for _, t := range tags {
		refs[t] = img
	}
	return tarball.MultiRefWriteToFile(path, refs)
}
