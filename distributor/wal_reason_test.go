package distributor

import "testing"

// TestWALFullReason: each reason for a full read keeps the label value and the progress
// phase that dashboards, alerts (deploy/prometheus/alerts.yaml) and docs/operations.md
// name.
func TestWALFullReason(t *testing.T) {
	for _, tc := range []struct {
		r            fullReason
		label, phase string
	}{
		{fullStartup, "start-up", "snapshot"},
		{fullReconcile, "reconcile", "reconcile"},
		{fullRetry, "retry", "reread"},
		{fullUnmapped, "unmapped", "reread"},
	} {
		if got := tc.r.String(); got != tc.label {
			t.Errorf("%d: label %q, want %q", int(tc.r), got, tc.label)
		}
		if got := tc.r.phase(); got != tc.phase {
			t.Errorf("%s: phase %q, want %q", tc.label, got, tc.phase)
		}
	}
	if got := fullReason(0).String(); got != "fullReason(0)" {
		t.Errorf("the zero reason: %q", got)
	}
}
