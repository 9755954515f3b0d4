// Package prometheus holds the Prometheus alerting rules for statecast (alerts.yaml); its
// test checks the file's shape and each rule's expression against the metrics the code
// registers (deploy/internal/promcheck: every metric, label and function on its type).
package prometheus

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/statecast/statecast/deploy/internal/promcheck"
	"go.yaml.in/yaml/v3"
)

// ruleFile is Prometheus's rule file format (what this file uses of it).
type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

func TestAlerts(t *testing.T) {
	b, err := os.ReadFile("alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var f ruleFile
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		t.Fatal(err)
	}
	metrics, err := promcheck.Registered()
	if err != nil {
		t.Fatal(err)
	}
	checker := &promcheck.Checker{Metrics: metrics, TargetLabels: promcheck.TargetLabels}
	var alerts []string
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || r.Expr == "" {
				t.Errorf("group %s: a rule without alert or expr: %+v", g.Name, r)
				continue
			}
			if slices.Contains(alerts, r.Alert) {
				t.Errorf("alert %s defined twice", r.Alert)
			}
			alerts = append(alerts, r.Alert)
			if s := r.Labels["severity"]; s != "critical" && s != "warning" {
				t.Errorf("alert %s: severity %q, want critical or warning", r.Alert, s)
			}
			if r.Annotations["summary"] == "" {
				t.Errorf("alert %s has no summary", r.Alert)
			}
			if r.For != "" {
				if _, err := time.ParseDuration(r.For); err != nil {
					t.Errorf("alert %s: for: %v", r.Alert, err)
				}
			}
			res := checker.Check(r.Expr)
			for _, err := range res.Errs {
				t.Errorf("alert %s: %v", r.Alert, err)
			}
			if len(res.Metrics) == 0 {
				t.Errorf("alert %s names no statecast metric", r.Alert)
			}
		}
	}
	if len(alerts) < 10 {
		t.Errorf("only %d alerts", len(alerts))
	}
}
