package player

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/statecast/statecast/kafkaconn"
	"go.uber.org/goleak"
)

// envChild makes the test binary run a player instead of the tests (TestKill9): its value
// is the topic; the broker list comes from STATECAST_KAFKA_BROKERS.
const envChild = "STATECAST_PLAYER_CHILD"

// sarama starts go-metrics' process-wide meter goroutine on first use; it is not ours.
func TestMain(m *testing.M) {
	if topic := os.Getenv(envChild); topic != "" {
		runChild(topic)
		return
	}
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"))
}

// runChild serves topic as stream "s" on a loopback port it prints on stdout, until killed.
func runChild(topic string) {
	p, err := New(Config{
		Insecure:         true,
		Kafka:            kafkaconn.Config{Brokers: strings.Split(os.Getenv("STATECAST_KAFKA_BROKERS"), ",")},
		Streams:          []StreamConfig{{Name: "s", Topic: topic}},
		ProgressInterval: 50 * time.Millisecond,
		AckTimeout:       testAckTimeout,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Println(lis.Addr().String())
	go func() { _ = p.Serve(lis) }()
	if err := p.Run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
