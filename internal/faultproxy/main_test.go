package faultproxy

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the tests when a goroutine outlives them: Close must end every one of
// the proxy's.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
