package ctl

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sort"

	"github.com/statecast/statecast/cacheclient"
)

// GetOptions says which view to read through which players.
type GetOptions struct {
	Players []string // player gRPC addresses
	Stream  string
	View    string
	Key     string // key text (cacheclient.Key); empty prints every row
	Logger  *slog.Logger
}

// Get subscribes to the view like a service's cache does (snapshot bootstrap from the
// player), waits until it is complete, and prints the row under Key — or every row, sorted
// by key. A missing key is an error naming the view and the key.
func Get(ctx context.Context, w io.Writer, o GetOptions) error {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c, err := cacheclient.New(cacheclient.Config{Addresses: o.Players, Stream: o.Stream, ClientID: "cachectl-get"},
		cacheclient.WithLogger(log))
	if err != nil {
		return err
	}
	view, err := cacheclient.Register(c, o.View, func(_ string, v []byte) (json.RawMessage, error) {
		return json.RawMessage(append([]byte(nil), v...)), nil
	})
	if err != nil {
		return err
	}
	if err := c.Start(); err != nil {
		return err
	}
	defer c.Close()
	if err := c.WaitReady(ctx); err != nil {
		return fmt.Errorf("get: view %s of stream %s: %w", o.View, o.Stream, err)
	}
	if o.Key != "" {
		v, ok := view.Get(o.Key)
		if !ok {
			return fmt.Errorf("get: view %s has no key %q (at index %d)", o.View, o.Key, view.Position())
		}
		_, err := fmt.Fprintf(w, "%s\n", v)
		return err
	}
	type row struct {
		k string
		v json.RawMessage
	}
	var rows []row
	view.Range(func(k string, v json.RawMessage) bool { rows = append(rows, row{k, v}); return true })
	sort.Slice(rows, func(i, j int) bool { return rows[i].k < rows[j].k })
	for _, r := range rows {
		fmt.Fprintf(w, "%s\t%s\n", r.k, r.v)
	}
	_, err = fmt.Fprintf(w, "-- view %s: %d row(s) at index %d\n", o.View, len(rows), view.Position())
	return err
}
