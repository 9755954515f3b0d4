package cacheclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/statecast/statecast/cacheclient"
)

// Event is a light object: only the fields the service needs from the events view.
type Event struct {
	ID     int64    `json:"id"`
	Name   string   `json:"name"`
	Status string   `json:"status"`
	Tags   []string `json:"tags"`
}

func decodeEvent(_ string, value []byte) (Event, error) {
	var e Event
	err := json.Unmarshal(value, &e)
	return e, err
}

// A service keeps the events view in memory, indexed by status and tag, logs changes, and
// serves reads from memory once the initial state is complete. Every replica of the
// service runs the same code: they share the service name, and each gets an instance id
// of its own, so that none takes another's place at the player.
func Example() {
	tlsConfig, err := cacheclient.TLSFiles("/etc/pricing/players-ca.pem", "", "") // or a client certificate for mTLS
	if err != nil {
		panic(err)
	}
	client, err := cacheclient.New(cacheclient.Config{
		Addresses: []string{"player-1:7070", "player-2:7070"}, // failover in this order
		Stream:    "sportsbook",
		Service:   "pricing-service", // shared by the replicas; InstanceID is generated
		TLS:       tlsConfig,
		Token:     cacheclient.TokenFile("/var/run/secrets/statecast/token"), // read at every subscription
		StateDir:  "/var/lib/pricing/cache",                                  // optional: restart from the saved position
	}, cacheclient.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, nil))))
	if err != nil {
		panic(err)
	}
	events, err := cacheclient.Register(client, "events", decodeEvent)
	if err != nil {
		panic(err)
	}
	events.AddIndex("status", func(e Event) []string { return []string{e.Status} })
	events.AddIndex("tag", func(e Event) []string { return e.Tags }) // zero, one or many values
	cacheclient.OnChange(events, func(ctx context.Context, ch cacheclient.Change[Event]) error {
		fmt.Println(ch.Op, ch.Key, ch.Old.Status, "→", ch.New.Status)
		return nil // an error is retried with backoff, then reported to Hooks.OnHandlerError
	})
	if err := client.Start(); err != nil {
		panic(err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := client.WaitReady(ctx); err != nil {
		panic(err)
	}
	if e, ok := events.Get("1000"); ok {
		fmt.Println(e.Name)
	}
	for _, e := range events.ByIndex("status", "live") { // read-only objects
		fmt.Println(e.ID)
	}
}

// Key builds the key text that Get expects from the key columns' texts: each column
// escaped, the columns joined by "|". A one-column key is escaped too.
func ExampleKey() {
	fmt.Println(cacheclient.Key("1000", "10001"))
	fmt.Println(cacheclient.Key(`a|b`))
	parts, _ := cacheclient.SplitKey(`a\|b|c`)
	fmt.Println(len(parts), parts[0])
	// Output:
	// 1000|10001
	// a\|b
	// 2 a|b
}

// Several reads that must agree use one Version (one published version of the view).
func ExampleView_Version() {
	c, _ := cacheclient.New(cacheclient.Config{Addresses: []string{"p:7070"}, Stream: "s", Service: "c"})
	events, _ := cacheclient.Register(c, "events", decodeEvent)
	s := events.Version()
	fmt.Println(s.Len(), s.Position())
	// Output: 0 -1
}

// Market is a light object of the markets view.
type Market struct {
	ID      int64 `json:"id"`
	EventID int64 `json:"event_id"`
}

// Reads of several views that must agree use one Cut: a source transaction that changed
// an event and its markets is in all of them or in none.
func ExampleClient_Read() {
	c, _ := cacheclient.New(cacheclient.Config{Addresses: []string{"p:7070"}, Stream: "s", Service: "c"})
	events, _ := cacheclient.Register(c, "events", decodeEvent)
	markets, _ := cacheclient.Register(c, "markets", func(_ string, v []byte) (Market, error) {
		var m Market
		err := json.Unmarshal(v, &m)
		return m, err
	})
	markets.AddIndex("event", func(m Market) []string { return []string{fmt.Sprint(m.EventID)} })

	cut := c.Read()
	ev, found := events.In(cut).Get("1000")
	ms := markets.In(cut).ByIndex("event", "1000")
	fmt.Println(ev.Name, found, len(ms), cut.Position())
	// Output:  false 0 -1
}

// Read-your-writes: after its own COMMIT, a service reads the WAL position on the same
// connection and waits until its cache reflects it, then answers from the cache.
func ExampleClient_WaitFor() {
	var client *cacheclient.Client // started, with the views the write touches
	var walPosition string         // SELECT pg_current_wal_insert_lsn()::text, after COMMIT
	handle := func(ctx context.Context) error {
		pos, err := cacheclient.ParseLSN(walPosition)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		switch err := client.WaitFor(ctx, pos); {
		case errors.Is(err, cacheclient.ErrStaleView):
			return err // a view the write touched is stopped upstream: do not answer from it
		case err != nil:
			return err // ctx, ErrClosed, ErrNoSourcePosition (views captured by polling)
		}
		// Every view of client now reflects the write (and any later commit).
		return nil
	}
	_ = handle
	fmt.Println(cacheclient.LSN(0x16_B374D848))
	// Output: 16/B374D848
}

// A service that cannot serve without its cache waits for it at start-up, and says why
// when it does not come: a refusal that cannot heal (a misspelt view, a missing grant)
// ends the wait at once; a player that cannot be reached is named when ctx ends.
func ExampleClient_WaitReady() {
	var client *cacheclient.Client // started
	start := func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		err := client.WaitReady(ctx)
		var se *cacheclient.SubscribeError
		switch {
		case err == nil:
			return nil
		case errors.Is(err, cacheclient.ErrStopped):
			// The config is wrong (errors.Is ErrUnknownView, ErrPermissionDenied, …): a
			// restart is refused again. Exit, and let the deploy fail.
			return fmt.Errorf("the cache cannot start: %w", err)
		case errors.As(err, &se):
			// ctx ended while a player refused or could not be reached: se.Addr and
			// se.Message say which and why (errors.Is ErrUnavailable, ErrUnauthenticated, …).
			return fmt.Errorf("the cache is not ready after a minute: %w", err)
		default:
			return err // a player served, but the initial state took longer than ctx
		}
	}
	_ = start
	err := error(&cacheclient.WaitError{Op: "WaitReady", Err: context.DeadlineExceeded,
		Cause: &cacheclient.SubscribeError{Addr: "10.0.0.7:7070", Code: codes.Unavailable, Message: "connection refused", Kind: cacheclient.ErrUnavailable}})
	fmt.Println(errors.Is(err, context.DeadlineExceeded), errors.Is(err, cacheclient.ErrUnavailable))
	fmt.Println(err)
	// Output:
	// true true
	// cacheclient: WaitReady: context deadline exceeded; the last error: cacheclient: player 10.0.0.7:7070: Unavailable: connection refused
}

// A gateway keeps one small Client per connected user, each holding that user's bets:
// with one Many, all of them are channels of one stream to each player instead of a
// Subscribe stream each, which the player keeps for a fraction of the memory.
func ExampleWithMany() {
	type Bet struct {
		ID     string `json:"id"`
		UserID string `json:"user_id"`
		Stake  string `json:"stake"`
	}
	decodeBet := func(_ string, value []byte) (Bet, error) {
		var b Bet
		err := json.Unmarshal(value, &b)
		return b, err
	}
	many := cacheclient.NewMany()
	defer many.Close() // after the Clients
	connect := func(userID string) (*cacheclient.Client, *cacheclient.View[Bet], error) {
		c, err := cacheclient.New(cacheclient.Config{
			Addresses: []string{"player-1:7070", "player-2:7070"},
			Stream:    "sportsbook",
			Service:   "bet-gateway",
		}, cacheclient.WithMany(many)) // the same TLS, token and dial options for every Client of one Many
		if err != nil {
			return nil, nil, err
		}
		bets, err := cacheclient.Register(c, "bets", decodeBet, cacheclient.WithFilter(fmt.Sprintf("user_id == %q", userID)))
		if err != nil {
			return nil, nil, err
		}
		return c, bets, c.Start()
	}
	client, bets, err := connect("u-1042")
	if err != nil {
		panic(err)
	}
	defer client.Close() // ends its channel only
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := client.WaitReady(ctx); err == nil {
		fmt.Println(bets.Len(), "open bets")
	}
}
