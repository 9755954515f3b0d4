// Package promcheck holds PromQL written outside the code — the alerting rules
// (deploy/prometheus/alerts.yaml) and the Grafana dashboard (deploy/grafana) — to the
// metrics the code registers: Registered collects every metric of the distributor, the
// player, cacheclient's collector (cacheprom) and the daemons' build info from real
// registries, with its type and labels (registered.go); Checker parses an expression with
// Prometheus's own parser and checks each metric it names, each label it matches, groups
// or joins on, and that counters are rated and gauges are not (check.go). A query of a
// metric that was renamed, or of a label it never had, returns nothing without an error:
// only such a check notices.
package promcheck

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	prom "github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/statecast/statecast/cacheclient"
	"github.com/statecast/statecast/cacheclient/cacheprom"
	"github.com/statecast/statecast/distributor"
	"github.com/statecast/statecast/internal/version"
	"github.com/statecast/statecast/internal/version/versionprom"
	"github.com/statecast/statecast/kafkaconn"
	"github.com/statecast/statecast/player"
)

// Metric is a metric the code registers.
type Metric struct {
	Name   string
	Type   dto.MetricType
	Labels []string // its variable and constant labels, sorted
}

// recorder registers collectors with a real registry and keeps each metric's name,
// labels and type.
type recorder struct {
	reg     *prom.Registry
	metrics map[string]Metric
}

// What a prometheus.Desc's String says: its name, and its constant labels (name="value",
// the value quoted) and variable labels (names; c(name) with a constraint), at its end.
var (
	descName   = regexp.MustCompile(`fqName: "([^"]+)"`)
	descLabels = regexp.MustCompile(`constLabels: \{(.*)\}, variableLabels: \{([^}]*)\}\}$`)
	constLabel = regexp.MustCompile(`([A-Za-z_][A-Za-z0-9_]*)="`)
)

func (r *recorder) Register(c prom.Collector) error {
	if err := r.reg.Register(c); err != nil {
		return err
	}
	ch := make(chan *prom.Desc, 64)
	go func() { c.Describe(ch); close(ch) }()
	types := collectedTypes(c)
	for d := range ch {
		s := d.String()
		m := descName.FindStringSubmatch(s)
		if m == nil {
			return fmt.Errorf("promcheck: a metric description without a name: %s", s)
		}
		metric := Metric{Name: m[1], Type: types[m[1]]}
		ls := descLabels.FindStringSubmatch(s)
		if ls == nil {
			return fmt.Errorf("promcheck: the labels of %s: %s", m[1], s)
		}
		for _, l := range constLabel.FindAllStringSubmatch(ls[1], -1) {
			metric.Labels = append(metric.Labels, l[1])
		}
		for _, l := range strings.Split(ls[2], ",") {
			if l = strings.TrimSuffix(strings.TrimPrefix(l, "c("), ")"); l != "" {
				metric.Labels = append(metric.Labels, l)
			}
		}
		slices.Sort(metric.Labels)
		if _, ok := types[m[1]]; !ok {
			metric.Type = typeByName(m[1])
		}
		r.metrics[metric.Name] = metric
	}
	return nil
}

func (r *recorder) MustRegister(cs ...prom.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

func (r *recorder) Unregister(c prom.Collector) bool { return r.reg.Unregister(c) }

// collectedTypes returns the type of each metric of c: a vector's from its Go type (it
// collects nothing before its first labelled child), any other's from what it collects.
func collectedTypes(c prom.Collector) map[string]dto.MetricType {
	var t dto.MetricType
	switch c.(type) {
	case *prom.CounterVec:
		t = dto.MetricType_COUNTER
	case *prom.GaugeVec:
		t = dto.MetricType_GAUGE
	case *prom.HistogramVec:
		t = dto.MetricType_HISTOGRAM
	case *prom.SummaryVec:
		t = dto.MetricType_SUMMARY
	default:
		out := map[string]dto.MetricType{}
		ch := make(chan prom.Metric, 64)
		go func() { c.Collect(ch); close(ch) }()
		for m := range ch {
			var d dto.Metric
			if err := m.Write(&d); err != nil {
				continue
			}
			name := descName.FindStringSubmatch(m.Desc().String())
			if name == nil {
				continue
			}
			switch {
			case d.Counter != nil:
				out[name[1]] = dto.MetricType_COUNTER
			case d.Gauge != nil:
				out[name[1]] = dto.MetricType_GAUGE
			case d.Histogram != nil:
				out[name[1]] = dto.MetricType_HISTOGRAM
			case d.Summary != nil:
				out[name[1]] = dto.MetricType_SUMMARY
			default:
				out[name[1]] = dto.MetricType_UNTYPED
			}
		}
		return out
	}
	out := map[string]dto.MetricType{}
	ch := make(chan *prom.Desc, 4)
	go func() { c.Describe(ch); close(ch) }()
	for d := range ch {
		if m := descName.FindStringSubmatch(d.String()); m != nil {
			out[m[1]] = t
		}
	}
	return out
}

// typeByName is the type of a metric that a collector did not show when collected (the
// player's per-target metrics exist only while a target is connected): by the naming
// convention every statecast metric follows, a counter ends in _total, and no histogram
// hides there.
func typeByName(name string) dto.MetricType {
	if strings.HasSuffix(name, "_total") {
		return dto.MetricType_COUNTER
	}
	return dto.MetricType_GAUGE
}

// Registered returns every metric the distributor, the player, cacheclient's collector
// (cacheprom) and the daemons' statecast_build_info register, by name. The components are
// made with configs that reach nothing (nothing is started); the cache client has one view,
// so that its per-view metrics are collected too.
func Registered() (map[string]Metric, error) {
	r := &recorder{reg: prom.NewRegistry(), metrics: map[string]Metric{}}
	dcfg := distributor.Config{
		Postgres: distributor.PostgresConfig{DSN: "postgres://localhost/x"},
		Streams: []distributor.StreamConfig{{Topic: "t", Capture: "poll",
			Views: []distributor.ViewConfig{{Name: "v", SQL: "SELECT 1 AS id", Key: []string{"id"}}}}},
	}
	dcfg.Kafka.Brokers = []string{"localhost:9092"}
	if _, err := distributor.New(dcfg, distributor.WithRegisterer(r)); err != nil {
		return nil, err
	}
	pcfg := player.Config{Insecure: true, Kafka: kafkaconn.Config{Brokers: []string{"localhost:9092"}}, Streams: []player.StreamConfig{{Name: "s"}}}
	p, err := player.New(pcfg, player.WithRegisterer(r))
	if err != nil {
		return nil, err
	}
	defer func() { _ = p.Close() }()
	c, err := cacheclient.New(cacheclient.Config{Addresses: []string{"127.0.0.1:1"}, Stream: "s", Service: "promcheck"})
	if err != nil {
		return nil, err
	}
	defer func() { _ = c.Close() }()
	if _, err := cacheclient.Register(c, "v", func(string, []byte) (int, error) { return 0, nil }); err != nil {
		return nil, err
	}
	if err := r.Register(cacheprom.NewCollector(c, nil)); err != nil {
		return nil, err
	}
	if err := r.Register(versionprom.Collector(version.Get())); err != nil {
		return nil, err
	}
	return r.metrics, nil
}
