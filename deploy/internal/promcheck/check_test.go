package promcheck

import (
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
)

// TestRegistered: the metrics come from the components' real registries, with their types
// (a vector's before it has a child, a collector's from what it collects) and labels
// (variable and constant).
func TestRegistered(t *testing.T) {
	ms, err := Registered()
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) < 50 {
		t.Fatalf("only %d metrics: the recorder misses registrations", len(ms))
	}
	for _, want := range []Metric{
		{"statecast_distributor_cycle_duration_seconds", dto.MetricType_HISTOGRAM, []string{"stream"}},
		{"statecast_distributor_full_rereads_total", dto.MetricType_COUNTER, []string{"reason", "stream", "view"}},
		{"statecast_distributor_slot_behind_bytes", dto.MetricType_GAUGE, []string{"stream"}},
		{"statecast_player_targets", dto.MetricType_GAUGE, []string{"service", "state", "stream"}},
		{"statecast_player_delivery_delay_seconds", dto.MetricType_HISTOGRAM, []string{"stream"}},
		{"statecast_cacheclient_view_entries", dto.MetricType_GAUGE, []string{"view"}},
		{"statecast_cacheclient_resyncs_total", dto.MetricType_COUNTER, nil},
		{"statecast_build_info", dto.MetricType_GAUGE, []string{"commit", "goversion", "version"}},
	} {
		got, ok := ms[want.Name]
		if !ok || got.Type != want.Type || !slices.Equal(got.Labels, want.Labels) {
			t.Errorf("%s: %+v, want %+v", want.Name, got, want)
		}
	}
}

func TestCheck(t *testing.T) {
	ms, err := Registered()
	if err != nil {
		t.Fatal(err)
	}
	c := &Checker{Metrics: ms, TargetLabels: []string{"job", "instance", "namespace"}}
	for _, tc := range []struct {
		expr    string
		metrics []string
		err     string // "" : valid
	}{
		{`max by (stream) (statecast_distributor_slot_behind_bytes{namespace="x", stream=~"a|b"})`, []string{"statecast_distributor_slot_behind_bytes"}, ""},
		{`histogram_quantile(0.99, sum by (stream, le) (rate(statecast_distributor_cycle_duration_seconds_bucket[5m])))`, []string{"statecast_distributor_cycle_duration_seconds"}, ""},
		{`sum by (stream) (rate(statecast_player_delivery_delay_seconds_count[5m]))`, []string{"statecast_player_delivery_delay_seconds"}, ""},
		{`deriv(statecast_distributor_source_position[5m])`, nil, ""},
		{`sum by (stream, view, reason) (increase(statecast_distributor_full_rereads_total[1h])) > 0`, nil, ""},
		{`count by (job, version) (statecast_build_info)`, nil, ""},
		{`max by (stream, service) (statecast_player_target_lag_seconds) * on (stream) group_left (view) max by (stream, view) (statecast_distributor_view_failed)`, nil, ""},
		{`label_replace(statecast_distributor_active, "topic", "$1", "stream", "(.*)")`, nil, ""},
		{`count({__name__=~"statecast_cacheclient_view_.+"}) by (view)`, nil, ""},
		// what the check is for
		{`statecast_distributor_slot_behind`, nil, "no registry of the code has this metric"},
		{`statecast_distributor_slot_behind_bytes{view="v"}`, nil, `has no label "view"`},
		{`sum by (view) (statecast_distributor_active)`, nil, `sum by "view", which its operand's series do not carry`},
		{`sum without (view) (statecast_distributor_active)`, nil, `sum without "view", which its operand's series do not carry`},
		{`sum by (stream) (rate(statecast_distributor_slot_behind_bytes[5m]))`, nil, "a gauge: rate() is for counters"},
		{`deriv(statecast_distributor_rows_published_total[5m])`, nil, "a counter: use rate()"},
		{`statecast_distributor_cycle_duration_seconds`, nil, "is a histogram"},
		{`statecast_distributor_slot_lost_total_bucket`, nil, "which has no _bucket series"},
		{`histogram_quantile(0.9, sum by (stream) (rate(statecast_distributor_cycle_duration_seconds_bucket[5m])))`, nil, `without "le"`},
		{`sum by (stream) (statecast_distributor_active) * on (view) sum by (stream, view) (statecast_distributor_view_failed)`, nil, `on(view): "view" is not a label of both sides`},
		{`statecast_distributor_active * on (stream) group_left (reason) statecast_distributor_view_failed`, nil, `group_left(reason): "reason" is not a label of the right side`},
		{`sum by (stream) (statecast_distributor_active`, nil, "unclosed left parenthesis"},
		{`{__name__=~"statecast_nothing_.+"}`, nil, "no registered metric matches"},
		{`statecast_cacheclient_lag_entries{pod="p"}`, nil, `has no label "pod"`},
	} {
		res := c.Check(tc.expr)
		var errs []string
		for _, e := range res.Errs {
			errs = append(errs, e.Error())
		}
		switch all := strings.Join(errs, "\n"); {
		case tc.err == "" && len(errs) > 0:
			t.Errorf("%s: %s", tc.expr, all)
		case tc.err != "" && !strings.Contains(all, tc.err):
			t.Errorf("%s: errors %q, want one saying %q", tc.expr, all, tc.err)
		}
		if tc.metrics != nil && !slices.Equal(res.Metrics, tc.metrics) {
			t.Errorf("%s: metrics %v, want %v", tc.expr, res.Metrics, tc.metrics)
		}
	}

	// The labels of a result, which a legend may name.
	for expr, want := range map[string][]string{
		`max by (stream) (statecast_distributor_slot_behind_bytes)`:                                                                                {"stream"},
		`statecast_distributor_active`:                                                                                                             {"instance", "job", "namespace", "stream"},
		`sum without (instance) (statecast_distributor_active)`:                                                                                    {"job", "namespace", "stream"},
		`histogram_quantile(0.5, sum by (le, stream) (rate(statecast_player_delivery_delay_seconds_bucket[5m])))`:                                  {"stream"},
		`sum by (stream) (statecast_distributor_active) * on (stream) group_left (view) max by (stream, view) (statecast_distributor_view_failed)`: {"stream", "view"},
		`sum(statecast_player_targets{state="S"}) or vector(0)`:                                                                                    {},
	} {
		if res := c.Check(expr); len(res.Errs) > 0 || !slices.Equal(res.Labels, want) {
			t.Errorf("%s: labels %v (%v), want %v", expr, res.Labels, res.Errs, want)
		}
	}
}
