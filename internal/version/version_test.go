package version

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestGet(t *testing.T) {
	built := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v0.2.0"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}}}
	devel := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}}
	for _, tc := range []struct {
		name, v, c string
		bi         *debug.BuildInfo
		want       Info
	}{
		{"stamped wins", "v0.1.0", "deadbeef", built, Info{"v0.1.0", "deadbeef", "go1.26.0"}},
		{"from the toolchain", "", "", built, Info{"v0.2.0", "abc123", "go1.26.0"}},
		{"devel is no version", "", "", devel, Info{Unknown, Unknown, "go1.26.0"}},
		{"no build info", "v1.0.0", "", nil, Info{Version: "v1.0.0", Commit: Unknown}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := get(tc.v, tc.c, func() (*debug.BuildInfo, bool) { return tc.bi, tc.bi != nil })
			if tc.bi == nil {
				tc.want.GoVersion = got.GoVersion // runtime.Version()
			}
			if got != tc.want {
				t.Fatalf("get = %+v, want %+v", got, tc.want)
			}
		})
	}
	if l := (Info{"v0.1.0", "abc", "go1.26.0"}).Line("player"); l != "player v0.1.0 (commit abc, go1.26.0)" {
		t.Fatalf("Line = %q", l)
	}
	if !strings.HasPrefix(Get().GoVersion, "go") {
		t.Fatalf("Get = %+v", Get())
	}
}
