// Package prometheus holds the Prometheus alerting rules for statecast (alerts.yaml); its
// test checks the file's shape and that every metric it names is one the code registers.
package prometheus

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	prom "github.com/prometheus/client_golang/prometheus"
	"gopkg.in/yaml.v3"

	"github.com/statecast/statecast/cacheclient/cacheprom"
	"github.com/statecast/statecast/distributor"
	"github.com/statecast/statecast/kafkaconn"
	"github.com/statecast/statecast/player"
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

// recorder is a Registerer that keeps the names of the metrics registered with it.
type recorder struct{ names map[string]bool }

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

func (r *recorder) Register(c prom.Collector) error {
	ch := make(chan *prom.Desc, 64)
	go func() { c.Describe(ch); close(ch) }()
	for d := range ch {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			r.names[m[1]] = true
		}
	}
	return nil
}

func (r *recorder) MustRegister(cs ...prom.Collector) {
	for _, c := range cs {
		_ = r.Register(c)
	}
}

func (r *recorder) Unregister(prom.Collector) bool { return true }

// registered returns the names of every metric the distributor, the player and cacheprom
// register.
func registered(t *testing.T) map[string]bool {
	r := &recorder{names: map[string]bool{}}
	dcfg := distributor.Config{
		Postgres: distributor.PostgresConfig{DSN: "postgres://localhost/x"},
		Streams: []distributor.StreamConfig{{Topic: "t", Capture: "poll",
			Views: []distributor.ViewConfig{{Name: "v", SQL: "SELECT 1 AS id", Key: []string{"id"}}}}},
	}
	dcfg.Kafka.Brokers = []string{"localhost:9092"}
	if _, err := distributor.New(dcfg, distributor.WithRegisterer(r)); err != nil {
		t.Fatal(err)
	}
	pcfg := player.Config{Insecure: true, Kafka: kafkaconn.Config{Brokers: []string{"localhost:9092"}}, Streams: []player.StreamConfig{{Name: "s"}}}
	if _, err := player.New(pcfg, player.WithRegisterer(r)); err != nil {
		t.Fatal(err)
	}
	r.MustRegister(cacheprom.NewCollector(nil, nil))
	return r.names
}

var metricName = regexp.MustCompile(`\bstatecast_[a-z0-9_]+`)

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
	names := registered(t)
	if len(names) < 20 {
		t.Fatalf("only %d metrics registered: the recorder is broken", len(names))
	}
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
			if strings.Count(r.Expr, "(") != strings.Count(r.Expr, ")") {
				t.Errorf("alert %s: unbalanced parentheses in %q", r.Alert, r.Expr)
			}
			found := metricName.FindAllString(r.Expr, -1)
			if len(found) == 0 {
				t.Errorf("alert %s names no statecast metric", r.Alert)
			}
			for _, m := range found {
				// A histogram's series are its name with a suffix.
				base := m
				for _, suf := range []string{"_bucket", "_sum", "_count"} {
					if b, ok := strings.CutSuffix(m, suf); ok && names[b] {
						base = b
					}
				}
				if !names[base] {
					t.Errorf("alert %s names %s, which no registry of the code has", r.Alert, m)
				}
			}
		}
	}
	if len(alerts) < 10 {
		t.Errorf("only %d alerts", len(alerts))
	}
}
