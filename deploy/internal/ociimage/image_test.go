package ociimage

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

var testBuild = Build{
	Version: "v9.8.7-test",
	Commit:  "0123456789abcdef0123456789abcdef01234567",
	Created: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
}

// TestImages builds every image as make images does, writes it as a docker load tarball,
// reads it back by its tags, checks its manifest and config, and runs the binary taken
// out of its layer with -version.
func TestImages(t *testing.T) {
	mod, err := RootModuleDir(".")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, s := range Specs {
		t.Run(s.Name, func(t *testing.T) {
			exe := filepath.Join(dir, s.Name)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			if err := BuildBinary(ctx, mod, s.Package, exe, testBuild); err != nil {
				t.Fatal(err)
			}
			checkStatic(t, exe)
			data, err := os.ReadFile(exe)
			if err != nil {
				t.Fatal(err)
			}
			img, err := s.Image(data, testBuild)
			if err != nil {
				t.Fatal(err)
			}
			// The image is OCI; a docker load tarball does not record media types (a
			// loaded one reads as Docker's), so they are checked here.
			m, err := img.Manifest()
			if err != nil {
				t.Fatal(err)
			}
			if mt, _ := img.MediaType(); mt != types.OCIManifestSchema1 || m.Config.MediaType != types.OCIConfigJSON || m.Layers[0].MediaType != types.OCILayer {
				t.Errorf("media types: manifest %s, config %s, layer %s; want OCI", mt, m.Config.MediaType, m.Layers[0].MediaType)
			}
			again, err := s.Image(data, testBuild)
			if err != nil {
				t.Fatal(err)
			}
			d1, _ := img.Digest()
			d2, _ := again.Digest()
			if d1 != d2 {
				t.Errorf("the same binary gave two digests: %s, %s", d1, d2)
			}
			tags, err := s.Tags(testBuild)
			if err != nil {
				t.Fatal(err)
			}
			tarPath := filepath.Join(dir, s.Name+".tar")
			if err := WriteTarball(tarPath, img, tags); err != nil {
				t.Fatal(err)
			}
			want := []string{"statecast/" + s.Name + ":v9.8.7-test", "statecast/" + s.Name + ":latest"}
			if got := loadTags(t, tarPath); !slices.Equal(got, want) {
				t.Errorf("tarball tags %v, want %v", got, want)
			}
			for _, tag := range tags {
				loaded, err := tarball.ImageFromPath(tarPath, &tag)
				if err != nil {
					t.Fatalf("%s: %v", tag, err)
				}
				checkImage(t, s, loaded, data, filepath.Join(dir, "from-image"))
			}
		})
	}
}

// loadTags are the RepoTags of the tarball's manifest.json, as docker load reads them.
func loadTags(t *testing.T, path string) []string {
	t.Helper()
	m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(path) })
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 1 {
		t.Fatalf("%d images in the tarball", len(m))
	}
	tags := slices.Clone(m[0].RepoTags)
	slices.Sort(tags)
	slices.Reverse(tags) // :v… before :latest
	return tags
}

func checkImage(t *testing.T, s Spec, img v1.Image, binary []byte, scratch string) {
	t.Helper()
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Layers) != 1 {
		t.Fatalf("%d layers, want 1 (an empty base and the binary)", len(m.Layers))
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH || !cf.Created.Time.Equal(testBuild.Created) {
		t.Errorf("os %s arch %s created %v", cf.OS, cf.Architecture, cf.Created)
	}
	if !slices.Equal(c.Entrypoint, []string{"/usr/local/bin/" + s.Name}) || !slices.Equal(c.Cmd, s.Cmd) {
		t.Errorf("entrypoint %q cmd %q", c.Entrypoint, c.Cmd)
	}
	if c.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532 (not root)", c.User)
	}
	var ports []string
	for _, p := range s.Ports {
		ports = append(ports, strconv.Itoa(p)+"/tcp")
	}
	if got := slices.Sorted(maps.Keys(c.ExposedPorts)); !slices.Equal(got, ports) {
		t.Errorf("exposed ports %v, want %v", got, ports)
	}
	wantLabels := map[string]string{
		"org.opencontainers.image.title":       s.Name,
		"org.opencontainers.image.description": s.Description,
		"org.opencontainers.image.version":     "v9.8.7-test",
		"org.opencontainers.image.revision":    testBuild.Commit,
		"org.opencontainers.image.created":     "2026-01-02T03:04:05Z",
		"org.opencontainers.image.source":      "https://github.com/statecast/statecast",
		"org.opencontainers.image.licenses":    "Apache-2.0",
	}
	if !reflect.DeepEqual(c.Labels, wantLabels) {
		t.Errorf("labels %v\nwant %v", c.Labels, wantLabels)
	}
	if !slices.Equal(cf.RootFS.DiffIDs, diffIDs(t, img)) {
		t.Errorf("rootfs diff ids %v do not match the layers", cf.RootFS.DiffIDs)
	}

	files := layerFiles(t, img)
	bin := files["usr/local/bin/"+s.Name]
	if bin.hdr == nil || bin.hdr.Mode != 0o755 || !bytes.Equal(bin.data, binary) {
		t.Fatalf("the layer's usr/local/bin/%s is not the binary, mode 0755", s.Name)
	}
	if tmp := files["tmp/"]; tmp.hdr == nil || tmp.hdr.Mode != 0o1777 {
		t.Errorf("no world-writable /tmp")
	}
	if home := files["home/nonroot/"]; home.hdr == nil || home.hdr.Uid != 65532 {
		t.Errorf("no home owned by the user")
	}
	if !strings.Contains(string(files["etc/passwd"].data), ":65532:65532:") {
		t.Errorf("/etc/passwd has no entry for the user: %q", files["etc/passwd"].data)
	}
	for n, f := range files {
		if !f.hdr.ModTime.Equal(testBuild.Created) {
			t.Errorf("%s: mtime %v, want the build's time (reproducible layers)", n, f.hdr.ModTime)
		}
	}

	exe := filepath.Join(scratch, s.Name)
	if err := os.MkdirAll(scratch, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(exe, bin.data, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(exe, "-version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s -version: %v\n%s", s.Name, err, out)
	}
	want := s.Name + " v9.8.7-test (commit " + testBuild.Commit + ", go"
	if strings.HasPrefix(s.Package, "./examples/") {
		// An example uses only the public API: it reports what the toolchain recorded,
		// not the stamp of statecast's own binaries.
		want = s.Name + " "
	}
	if !strings.HasPrefix(string(out), want) {
		t.Errorf("%s -version = %q, want %q…", s.Name, out, want)
	}
}

func diffIDs(t *testing.T, img v1.Image) []v1.Hash {
	t.Helper()
	ls, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	var out []v1.Hash
	for _, l := range ls {
		h, err := l.DiffID()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, h)
	}
	return out
}

type file struct {
	hdr  *tar.Header
	data []byte
}

func layerFiles(t *testing.T, img v1.Image) map[string]file {
	t.Helper()
	ls, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	rc, err := ls[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	out := map[string]file{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name] = file{hdr: h, data: data}
	}
}

// checkStatic fails unless exe is a static ELF binary: no interpreter, no shared library.
func checkStatic(t *testing.T, exe string) {
	t.Helper()
	f, err := elf.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Fatalf("%s is dynamically linked (program header %v)", exe, p.Type)
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Fatalf("%s needs %v", exe, libs)
	}
	if f.Section(".symtab") != nil {
		t.Errorf("%s has a symbol table (want -s -w)", exe)
	}
}

func TestTags(t *testing.T) {
	s, _ := Lookup("player")
	tags, err := s.Tags(Build{Version: "v1.2.3+meta"})
	if err != nil {
		t.Fatal(err)
	}
	got := []string{tags[0].String(), tags[1].String()}
	if !slices.Equal(got, []string{"statecast/player:v1.2.3-meta", "statecast/player:latest"}) {
		t.Fatalf("tags %v", got)
	}
	if _, err := name.NewTag("statecast/player:" + tagOf("v0.0.0-1-gabc-dirty")); err != nil {
		t.Fatal(err)
	}
}
