// Package grafana holds the Grafana dashboard of statecast (statecast.json) and the
// kustomization that makes it a ConfigMap for the Grafana sidecar; its tests decode the
// dashboard strictly into Grafana's dashboard schema (the Grafana Foundation SDK's types),
// check its layout, and every query in it against the metrics the code registers
// (deploy/internal/promcheck: each metric, label and function on its type, each legend's
// labels).
package grafana

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	sdk "github.com/grafana/grafana-foundation-sdk/go/dashboard"

	"github.com/statecast/statecast/deploy/internal/promcheck"
)

// dashboard is what the test reads of Grafana's dashboard JSON model.
type dashboard struct {
	UID           string  `json:"uid"`
	Title         string  `json:"title"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []variable `json:"list"`
	} `json:"templating"`
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type panel struct {
	ID          int         `json:"id"`
	Type        string      `json:"type"`
	Title       string      `json:"title"`
	Description string      `json:"description"`
	Datasource  *datasource `json:"datasource"`
	GridPos     struct {
		H, W, X, Y int
	} `json:"gridPos"`
	FieldConfig struct {
		Defaults struct {
			Unit string `json:"unit"`
		} `json:"defaults"`
	} `json:"fieldConfig"`
	Targets []struct {
		RefID        string      `json:"refId"`
		Datasource   *datasource `json:"datasource"`
		Expr         string      `json:"expr"`
		LegendFormat string      `json:"legendFormat"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's
}

type variable struct {
	Name       string          `json:"name"`
	Type       string          `json:"type"`
	Query      json.RawMessage `json:"query"`
	Datasource *datasource     `json:"datasource"`
	AllValue   string          `json:"allValue"`
}

func load(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile("statecast.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("statecast.json: %v", err)
	}
	return d
}

// builtins are Grafana's own variables a query may use, with a value to parse it with.
var builtins = map[string]string{"__rate_interval": "5m", "__interval": "1m", "__range": "1h"}

var varRef = regexp.MustCompile(`\$(?:\{([A-Za-z0-9_]+)(?::[a-z]+)?\}|([A-Za-z0-9_]+))`)

// expand replaces Grafana's variables in a query as Grafana would before sending it: its
// built-ins by a duration, the dashboard's own by a regular expression (they are used in
// =~ matchers); a variable the dashboard does not define is an error.
func expand(q string, vars map[string]variable) (string, error) {
	var err error
	out := varRef.ReplaceAllStringFunc(q, func(ref string) string {
		m := varRef.FindStringSubmatch(ref)
		name := m[1] + m[2]
		if v, ok := builtins[name]; ok {
			return v
		}
		if _, ok := vars[name]; !ok {
			err = fmt.Errorf("$%s is not a variable of the dashboard", name)
		}
		return ".*"
	})
	return out, err
}

var legendRef = regexp.MustCompile(`\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}`)

// TestDashboard: the dashboard parses, its panels are laid out on Grafana's 24-column
// grid without overlapping, each reads the dashboard's Prometheus data source, and every
// query is PromQL that reads metrics and labels the code registers, each legend naming
// labels its query's series carry; its variables' queries too.
func TestDashboard(t *testing.T) {
	d := load(t)
	if d.UID != "statecast" || d.Title == "" || d.SchemaVersion < 36 {
		t.Errorf("uid %q, title %q, schema version %d", d.UID, d.Title, d.SchemaVersion)
	}
	metrics, err := promcheck.Registered()
	if err != nil {
		t.Fatal(err)
	}
	checker := &promcheck.Checker{Metrics: metrics, TargetLabels: promcheck.TargetLabels}

	vars := map[string]variable{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v
	}
	if ds, ok := vars["datasource"]; !ok || ds.Type != "datasource" || string(ds.Query) != `"prometheus"` {
		t.Errorf("no datasource variable of type prometheus: %+v", ds)
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		if v.Datasource == nil || v.Datasource.UID != "${datasource}" {
			t.Errorf("variable %s: data source %+v, want ${datasource}", v.Name, v.Datasource)
		}
		if v.AllValue != ".*" {
			t.Errorf("variable %s: allValue %q: with .* an absent label matches too (docker compose has no namespace)", v.Name, v.AllValue)
		}
		checkVariable(t, checker, vars, v)
	}

	var all []panel
	for _, p := range d.Panels {
		all = append(all, p)
		all = append(all, p.Panels...)
	}
	ids := map[int]bool{}
	used := map[string]bool{}
	var cells [][24]bool
	for _, p := range all {
		if ids[p.ID] || p.ID == 0 {
			t.Errorf("panel %q: id %d not unique", p.Title, p.ID)
		}
		ids[p.ID] = true
		g := p.GridPos
		if g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 {
			t.Errorf("panel %q: gridPos %+v outside the 24 columns", p.Title, g)
			continue
		}
		overlaps := false
		for y := g.Y; y < g.Y+g.H; y++ {
			for len(cells) <= y {
				cells = append(cells, [24]bool{})
			}
			for x := g.X; x < g.X+g.W; x++ {
				if cells[y][x] && !overlaps {
					t.Errorf("panel %q overlaps another at (%d, %d)", p.Title, x, y)
					overlaps = true
				}
				cells[y][x] = true
			}
		}
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" || p.Datasource.Type != "prometheus" {
			t.Errorf("panel %q: data source %+v, want the ${datasource} variable", p.Title, p.Datasource)
		}
		if p.Description == "" || p.FieldConfig.Defaults.Unit == "" {
			t.Errorf("panel %q: a panel says what it shows (description) and in what (unit)", p.Title)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			expr, err := expand(q.Expr, vars)
			if err != nil {
				t.Errorf("panel %q: %v", p.Title, err)
				continue
			}
			res := checker.Check(expr)
			for _, err := range res.Errs {
				t.Errorf("panel %q: %v", p.Title, err)
			}
			if len(res.Metrics) == 0 {
				t.Errorf("panel %q: %s reads no statecast metric", p.Title, q.Expr)
			}
			for _, m := range res.Metrics {
				used[m] = true
			}
			for _, l := range legendRef.FindAllStringSubmatch(q.LegendFormat, -1) {
				if res.Labels != nil && !slices.Contains(res.Labels, l[1]) {
					t.Errorf("panel %q: legend %q names %s, which %s does not keep (it keeps %v)", p.Title, q.LegendFormat, l[1], q.Expr, res.Labels)
				}
			}
		}
	}

	// What the dashboard is for: the distributor's capture and cycles, the player's
	// targets and delivery, the clients' lag, staleness and contents.
	for _, m := range []string{
		"statecast_distributor_active", "statecast_distributor_slot_behind_bytes", "statecast_distributor_capture_lag_seconds",
		"statecast_distributor_source_position", "statecast_distributor_cycle_duration_seconds", "statecast_distributor_full_rereads_total",
		"statecast_distributor_view_read_seconds_total", "statecast_distributor_slot_retained_bytes", "statecast_distributor_view_failed",
		"statecast_player_targets", "statecast_player_target_lag_seconds", "statecast_player_target_lag_entries",
		"statecast_player_delivery_delay_seconds",
		"statecast_cacheclient_ready", "statecast_cacheclient_lag_entries", "statecast_cacheclient_staleness_seconds",
		"statecast_cacheclient_view_entries",
	} {
		if !used[m] {
			t.Errorf("no panel shows %s", m)
		}
	}
}

// TestDashboardSchema: the dashboard decodes strictly into the Grafana Foundation SDK's
// types of Grafana's dashboard schema, with the panel plugins' options (timeseries, stat):
// an unknown field, a field of the wrong type or a missing required one is an error, as a
// value out of its constraints is for Validate.
func TestDashboardSchema(t *testing.T) {
	plugins.RegisterDefaultPlugins()
	b, err := os.ReadFile("statecast.json")
	if err != nil {
		t.Fatal(err)
	}
	// The classic dashboard model: what the sidecar provisions and Import reads (the
	// SDK's v2 is the model of Grafana's newer dashboard API, not of this file).
	//lint:ignore SA1019 statecast.json is a classic dashboard
	var d sdk.Dashboard
	if err := d.UnmarshalJSONStrict(b); failed(err) {
		t.Errorf("statecast.json against Grafana's dashboard schema:\n%v", err)
	}
	if err := d.Validate(); failed(err) {
		t.Errorf("statecast.json: %v", err)
	}
	if len(d.Panels) == 0 {
		t.Error("no panel decoded")
	}
}

// failed reports whether err, from the SDK, holds an error: it returns its cog.BuildErrors
// even when empty (a nil slice in a non-nil error).
func failed(err error) bool {
	var errs cog.BuildErrors
	if errors.As(err, &errs) {
		return len(errs) > 0
	}
	return err != nil
}

var labelValues = regexp.MustCompile(`^label_values\((?:(.+),\s*)?([A-Za-z_][A-Za-z0-9_]*)\)$`)

// checkVariable checks a query variable: label_values(selector, label) of a selector the
// code's metrics answer and a label they carry.
func checkVariable(t *testing.T, checker *promcheck.Checker, vars map[string]variable, v variable) {
	t.Helper()
	var q struct {
		Query string `json:"query"`
	}
	if err := json.Unmarshal(v.Query, &q); err != nil {
		t.Errorf("variable %s: query %s: %v", v.Name, v.Query, err)
		return
	}
	m := labelValues.FindStringSubmatch(q.Query)
	if m == nil || m[1] == "" {
		t.Errorf("variable %s: %q is not label_values(selector, label)", v.Name, q.Query)
		return
	}
	sel, err := expand(m[1], vars)
	if err != nil {
		t.Errorf("variable %s: %v", v.Name, err)
		return
	}
	res := checker.Check(sel)
	for _, err := range res.Errs {
		t.Errorf("variable %s: %v", v.Name, err)
	}
	if res.Labels != nil && !slices.Contains(res.Labels, m[2]) {
		t.Errorf("variable %s: %s carries no label %s (it has %s)", v.Name, m[1], m[2], strings.Join(res.Labels, ", "))
	}
}
