package ctl

import (
	"fmt"
	"io"

	"github.com/statecast/statecast/distributor"
)

// Validate loads a distributor config file with the distributor's own checks (unknown
// fields, ${ENV}, cron, view names and keys, Kafka client settings) and prints what it
// would publish. It does not connect to PostgreSQL or Kafka; SQL is checked at start-up.
func Validate(w io.Writer, path string) error {
	cfg, err := distributor.LoadConfig(path)
	if err != nil {
		return err
	}
	views := 0
	for _, s := range cfg.Streams {
		views += len(s.Views)
	}
	fmt.Fprintf(w, "%s: ok — %d stream(s), %d view(s)\n", path, len(cfg.Streams), views)
	for _, s := range cfg.Streams {
		fmt.Fprintf(w, "  stream %s\n", s.Topic)
		for _, v := range s.Views {
			inc := "full only"
			if v.Incremental != "" {
				inc = "incremental on " + v.Incremental
			}
			fmt.Fprintf(w, "    view %-20s key %v, %s\n", v.Name, v.Key, inc)
		}
	}
	return nil
}
