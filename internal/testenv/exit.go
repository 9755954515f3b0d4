package testenv

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"
)

// RunCommand runs bin with args (env added to the test's environment) to its end, at most
// a minute, and returns what it wrote (stdout and stderr together) and its exit status.
func RunCommand(t testing.TB, bin string, args []string, env ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &ee) && ctx.Err() == nil:
		return string(out), ee.ExitCode()
	}
	t.Fatalf("testenv: %s %v: %v\n%s", bin, args, err, out)
	return "", -1
}
