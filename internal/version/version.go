// Package version is the version of statecast's binaries: what -version prints.
//
// Release builds stamp Version and Commit with the linker (make images, the Dockerfile):
//
//	go build -ldflags "-X github.com/statecast/statecast/internal/version.Version=v0.1.0 \
//	    -X github.com/statecast/statecast/internal/version.Commit=$(git rev-parse HEAD)"
//
// A binary built without them (go build, go run, go install) reports what the Go
// toolchain recorded instead: the module version and the VCS revision when known.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Set with -ldflags -X at build time; empty when not stamped.
var (
	// Version is the release version, a semantic version with a leading v ("v0.1.0").
	Version string
	// Commit is the full git commit the binary was built from.
	Commit string
)

// Unknown stands for a version or commit that neither the linker nor the toolchain
// recorded.
const Unknown = "unknown"

// Info is a binary's version.
type Info struct {
	Version   string // "v0.1.0", or Unknown
	Commit    string // git commit, or Unknown
	GoVersion string // the Go toolchain that built the binary
}

// Get returns the running binary's version: the stamped values first, then the build
// information the Go toolchain embedded.
func Get() Info {
	return get(Version, Commit, debug.ReadBuildInfo)
}

func get(v, c string, read func() (*debug.BuildInfo, bool)) Info {
	i := Info{Version: v, Commit: c, GoVersion: runtime.Version()}
	if bi, ok := read(); ok {
		if i.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			i.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && i.Commit == "" {
				i.Commit = s.Value
			}
		}
		if bi.GoVersion != "" {
			i.GoVersion = bi.GoVersion
		}
	}
	if i.Version == "" {
		i.Version = Unknown
	}
	if i.Commit == "" {
		i.Commit = Unknown
	}
	return i
}

// Line is the line -version prints for the program called prog:
// "player v0.1.0 (commit 0123abc…, go1.26.0)".
func (i Info) Line(prog string) string {
	return fmt.Sprintf("%s %s (commit %s, %s)", prog, i.Version, i.Commit, i.GoVersion)
}
