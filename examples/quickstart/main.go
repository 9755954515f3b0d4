// Command quickstart is the service of docs/quickstart.md: it embeds cacheclient, keeps
// the demo's selections view in memory with an index by market, and reads its own write.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/statecast/statecast/cacheclient"
)

// Selection is a light object: the fields this service needs from a selections row.
type Selection struct {
	MarketID int64  `json:"market_id"`
	ID       int64  `json:"id"`
	Name     string `json:"name"`
	Price    string `json:"price"` // numeric arrives as exact decimal text
}

func main() {
	players := flag.String("players", "127.0.0.1:7070", "player addresses, or a target such as dns:///player-headless:7070")
	db := flag.String("db", "", "the demo database: write a price, then read it from the cache (optional)")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// 1. A client of the stream, and the views it keeps, typed.
	client, err := cacheclient.New(cacheclient.Config{
		Addresses: []string{*players},
		Stream:    "sportsbook",
		Service:   "quickstart",
	})
	if err != nil {
		log.Fatal(err)
	}
	selections, err := cacheclient.Register(client, "selections", func(key string, value []byte) (Selection, error) {
		var s Selection
		err := json.Unmarshal(value, &s)
		return s, err
	})
	if err != nil {
		log.Fatal(err)
	}
	// 2. A secondary index: the values to find a row by.
	if err := selections.AddIndex("market", func(s Selection) []string {
		return []string{strconv.FormatInt(s.MarketID, 10)}
	}); err != nil {
		log.Fatal(err)
	}

	// 3. Start, and wait until the cache holds the views' whole initial state.
	if err := client.Start(); err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	if err := client.WaitReady(ctx); err != nil {
		log.Fatal(err)
	}

	// 4. Reads are from memory, and never block. ByIndex answers in the order of the
	// rows' key texts (here market_id|id).
	fmt.Println(selections.Len(), "selections")
	for _, s := range selections.ByIndex("market", "10001") {
		fmt.Println(s.Name, s.Price)
	}

	// 5. Read your own write: after COMMIT, the WAL position on the same connection, then
	// WaitFor until the cache reflects every commit up to it.
	if *db == "" {
		return
	}
	conn, err := pgx.Connect(ctx, *db)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "UPDATE selections SET price = 4.200 WHERE id = 100011"); err != nil {
		log.Fatal(err)
	}
	var lsn string
	if err := conn.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&lsn); err != nil {
		log.Fatal(err)
	}
	pos, err := cacheclient.ParseLSN(lsn)
	if err != nil {
		log.Fatal(err)
	}
	if err := client.WaitFor(ctx, pos); err != nil {
		log.Fatal(err)
	}
	s, _ := selections.Get(cacheclient.Key("10001", "100011")) // the key columns: market_id, id
	fmt.Println("after my write:", s.Name, s.Price)
}
