// Command images builds statecast's container images without a container engine (make
// images): static binaries, each appended as one layer to an empty base (package
// deploy/internal/ociimage), written as tarballs that `docker load -i` reads.
//
//	cd deploy && go run ./images -out ../.run/images -version v0.1.0 -commit $(git rev-parse HEAD) \
//	    -created $(git log -1 --format=%cI) [-arch amd64] [name ...]
//
// With no names it builds every image: distributor, player, cachectl, sportsbook.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"time"

	"github.com/statecast/statecast/deploy/internal/ociimage"
)

func main() {
	out := flag.String("out", ".run/images", "directory for the image tarballs (<name>.tar) and the binaries (bin/)")
	version := flag.String("version", "v0.0.0-dev", "version to stamp and tag (a semantic version with a leading v)")
	commit := flag.String("commit", "unknown", "git commit to stamp")
	created := flag.String("created", "", "creation time, RFC 3339 (default: the Unix epoch, for reproducible images)")
	arch := flag.String("arch", "", "GOARCH to build for (default: this machine's)")
	flag.Parse()
	if err := run(*out, *version, *commit, *created, *arch, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
}

func run(out, version, commit, created, arch string, names []string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	b := ociimage.Build{Version: version, Commit: commit, Created: time.Unix(0, 0).UTC(), Arch: arch}
	if created != "" {
		t, err := time.Parse(time.RFC3339, created)
		if err != nil {
			return fmt.Errorf("-created: %w", err)
		}
		b.Created = t.UTC()
	}
	specs := ociimage.Specs
	if len(names) > 0 {
		specs = nil
		for _, n := range names {
			s, ok := ociimage.Lookup(n)
			if !ok {
				return fmt.Errorf("no image %q", n)
			}
			specs = append(specs, s)
		}
	}
	mod, err := ociimage.RootModuleDir(".")
	if err != nil {
		return err
	}
	bin := filepath.Join(out, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return err
	}
	for _, s := range specs {
		exe, err := filepath.Abs(filepath.Join(bin, s.Name))
		if err != nil {
			return err
		}
		if err := ociimage.BuildBinary(ctx, mod, s.Package, exe, b); err != nil {
			return err
		}
		data, err := os.ReadFile(exe)
		if err != nil {
			return err
		}
		img, err := s.Image(data, b)
		if err != nil {
			return fmt.Errorf("%s: %w", s.Name, err)
		}
		tags, err := s.Tags(b)
		if err != nil {
			return fmt.Errorf("%s: %w", s.Name, err)
		}
		path := filepath.Join(out, s.Name+".tar")
		if err := ociimage.WriteTarball(path, img, tags); err != nil {
			return fmt.Errorf("%s: %w", s.Name, err)
		}
		d, _ := img.Digest()
		fmt.Printf("%s\t%s\t%v\t%s\n", path, d, tags, exe)
	}
	return nil
}
