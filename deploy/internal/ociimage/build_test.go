package ociimage

import (
	"os"
	"path/filepath"
	"testing"
)

// TestRootModuleDir: from inside the deploy module, the directory found is the root
// module's (where go build ./cmd/... works), not deploy/go.mod's.
func TestRootModuleDir(t *testing.T) {
	root, err := RootModuleDir(".")
	if err != nil {
		t.Fatal(err)
	}
	want, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	if root != want {
		t.Errorf("RootModuleDir(.) = %s, want %s", root, want)
	}
	if _, err := os.Stat(filepath.Join(root, "deploy", "go.mod")); err != nil {
		t.Errorf("deploy/go.mod, the nested module passed over: %v", err)
	}
	for _, tc := range []struct{ gomod, want string }{
		{"module github.com/statecast/statecast\n\ngo 1.26.0\n", RootModule},
		{"// comment\nmodule \"github.com/statecast/statecast/deploy\"\r\n", RootModule + "/deploy"},
		{"go 1.26.0\n", ""},
	} {
		if got := modulePath([]byte(tc.gomod)); got != tc.want {
			t.Errorf("modulePath(%q) = %q, want %q", tc.gomod, got, tc.want)
		}
	}
	if _, err := RootModuleDir(t.TempDir()); err == nil {
		t.Error("RootModuleDir(a temporary directory): no error")
	}
}
