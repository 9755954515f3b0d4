package daemon

import "github.com/prometheus/client_golang/prometheus"

// TokenCollector reports the state of a daemon's token sets at scrape time, so that an
// alert needs no log: <prefix>_tokens_loaded{field} (tokens in use: 0 after the file was
// emptied or deleted) and <prefix>_tokens_file_refused{field} (1 while the file is
// refused: TokenSet.Err). Add the sets before the first scrape.
type TokenCollector struct {
	loaded, refused *prometheus.Desc
	sets            []*TokenSet
}

// NewTokenCollector returns a collector of sets (nil ones skipped) whose metric names
// start with prefix (statecast_player).
func NewTokenCollector(prefix string, sets ...*TokenSet) *TokenCollector {
	c := &TokenCollector{
		loaded: prometheus.NewDesc(prefix+"_tokens_loaded",
			"Tokens in use, by config field (tokens, admin.tokens): 0 after the file was emptied or deleted.", []string{"field"}, nil),
		refused: prometheus.NewDesc(prefix+"_tokens_file_refused",
			"1 while the tokens file is refused (deleted, unreadable, a malformed line): only the tokens still on its well-formed lines are accepted, none added.", []string{"field"}, nil),
	}
	for _, s := range sets {
		c.Add(s)
	}
	return c
}

// Add reports s too (nil: nothing).
func (c *TokenCollector) Add(s *TokenSet) {
	if s != nil {
		c.sets = append(c.sets, s)
	}
}

func (c *TokenCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.loaded
	ch <- c.refused
}

func (c *TokenCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.sets {
		refused := 0.0
		if s.Err() != nil {
			refused = 1
		}
		ch <- prometheus.MustNewConstMetric(c.loaded, prometheus.GaugeValue, float64(s.Len()), s.Name())
		ch <- prometheus.MustNewConstMetric(c.refused, prometheus.GaugeValue, refused, s.Name())
	}
}
