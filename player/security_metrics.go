package player

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/statecast/statecast/internal/daemon"
)

// tokenCollector reports each tokens file's state at scrape time: how many tokens are in
// use and whether the file is refused (daemon.TokenSet.Err), so that an alert needs no log.
type tokenCollector struct {
	sets []*daemon.TokenSet
}

var (
	descTokensLoaded = prometheus.NewDesc("statecast_player_tokens_loaded",
		"Tokens in use, by config field (tokens, admin.tokens): 0 after the file was emptied or deleted.", []string{"field"}, nil)
	descTokensRefused = prometheus.NewDesc("statecast_player_tokens_file_refused",
		"1 while the tokens file is refused (deleted, unreadable, a malformed line): only the tokens still on its well-formed lines are accepted, none added.", []string{"field"}, nil)
)

func (c *tokenCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descTokensLoaded
	ch <- descTokensRefused
}

func (c *tokenCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.sets {
		refused := 0.0
		if s.Err() != nil {
			refused = 1
		}
		ch <- prometheus.MustNewConstMetric(descTokensLoaded, prometheus.GaugeValue, float64(s.Len()), s.Name())
		ch <- prometheus.MustNewConstMetric(descTokensRefused, prometheus.GaugeValue, refused, s.Name())
	}
}
