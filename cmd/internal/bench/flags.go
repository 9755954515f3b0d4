package bench

import (
	"errors"
	"flag"
	"os"
	"strconv"
	"strings"
)

// brokersFlag registers -brokers with the default from STATECAST_KAFKA_BROKERS.
func brokersFlag(fs *flag.FlagSet) *string {
	return fs.String("brokers", os.Getenv("STATECAST_KAFKA_BROKERS"), "Kafka brokers (comma-separated; default $STATECAST_KAFKA_BROKERS)")
}

// splitBrokers splits the -brokers value; empty is an error that says how to set it.
func splitBrokers(s string) ([]string, error) {
	if s == "" {
		return nil, errors.New("no Kafka brokers: set -brokers or STATECAST_KAFKA_BROKERS (make infra; . .run/env)")
	}
	return strings.Split(s, ","), nil
}

// Ints parses a comma-separated list of integers ("2, 5,10").
func Ints(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

// HasSystem reports whether name is one of the comma-separated list (-systems).
func HasSystem(list, name string) bool {
	for _, s := range strings.Split(list, ",") {
		if strings.TrimSpace(s) == name {
			return true
		}
	}
	return false
}
