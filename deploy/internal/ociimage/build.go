package ociimage

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// VersionPackage is the package whose Version and Commit the linker stamps.
const VersionPackage = "github.com/statecast/statecast/internal/version"

// Build says what to stamp into the binaries and the images.
type Build struct {
	// Version is a semantic version with a leading v (the image tag; "+" becomes "-").
	Version string
	// Commit is the git commit the binaries are built from.
	Commit string
	// Created is the images' creation time and every file's modification time: the
	// commit's time keeps the images reproducible.
	Created time.Time
	// Arch is the GOARCH to build for (default: the machine's).
	Arch string
}

func (b Build) arch() string {
	if b.Arch == "" {
		return runtime.GOARCH
	}
	return b.Arch
}

// LDFlags are the linker flags of a release binary: no symbol table or DWARF, and the
// version stamped.
func (b Build) LDFlags() string {
	return fmt.Sprintf("-s -w -X %s.Version=%s -X %s.Commit=%s", VersionPackage, b.Version, VersionPackage, b.Commit)
}

// BuildArgs are the go build arguments of a release binary (after "go"): static
// (CGO_ENABLED=0 in the environment, see BuildBinary), without file system paths
// (-trimpath), with the time zone database embedded (robfig/cron's CRON_TZ= schedules
// need it in an image that has none), stamped.
func (b Build) BuildArgs(pkg, out string) []string {
	return []string{"build", "-trimpath", "-tags", "timetzdata", "-ldflags", b.LDFlags(), "-o", out, pkg}
}

// BuildBinary compiles pkg (relative to moduleDir, e.g. "./cmd/player") into out as a
// static linux binary.
func BuildBinary(ctx context.Context, moduleDir, pkg, out string, b Build) error {
	cmd := exec.CommandContext(ctx, "go", b.BuildArgs(pkg, out)...)
	cmd.Dir = moduleDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+b.arch())
	if o, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %w\n%s", strings.Join(cmd.Args[1:], " "), err, o)
	}
	return nil
}

// RootModule is the module whose commands the images hold: the repository's root module.
// deploy/ is a module of its own (deploy/go.mod) nested in it.
const RootModule = "github.com/statecast/statecast"

// RootModuleDir returns the directory of the statecast root module (the go.mod whose
// module line is RootModule) at or above dir: where go build ./cmd/... runs. A go.mod of
// another module on the way, such as deploy/go.mod, is passed over.
func RootModuleDir(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && modulePath(b) == RootModule {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod of module %s at or above %s", RootModule, dir)
		}
	}
}

// modulePath is the path on a go.mod's module line ("" when it has none).
func modulePath(gomod []byte) string {
	for _, line := range strings.Split(string(gomod), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "module" {
			return strings.Trim(f[1], `"`)
		}
	}
	return ""
}
