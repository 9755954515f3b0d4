package ctl

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
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
	// WaitFor, when set, is a source position (an LSN, "16/B374D848"): Get reads the view
	// once the cache reflects every commit up to it (cacheclient's WaitFor).
	WaitFor string
	Logger  *slog.Logger
	// TLS and Token authenticate to the players (nil, "": plaintext, no token).
	TLS   *tls.Config
	Token string
	// Service and InstanceID name the client at the player (defaults "cachectl" and a
	// generated instance id, so that two cachectl runs never replace each other).
	Service    string
	InstanceID string
	// Output is "table" (the default: key, tab, value lines and a summary line; one key:
	// its value) or "json" (one object: view, index, source position, rows or row).
	Output string
	// Selection, when not zero, reads only the rows the player selects: a filter and/or a
	// shard (cacheclient.Selection); the output says which.
	Selection cacheclient.Selection
}

// getJSON is what Get prints with Output "json".
type getJSON struct {
	Stream         string          `json:"stream"`
	View           string          `json:"view"`
	Index          int64           `json:"index"`
	SourcePosition string          `json:"source_position,omitempty"`
	Selection      string          `json:"selection,omitempty"` // cacheclient.Selection.String
	Key            string          `json:"key,omitempty"`
	Value          json.RawMessage `json:"value,omitempty"`
	Rows           *[]getRow       `json:"rows,omitempty"` // set, possibly empty, without Key
}

type getRow struct {
	Key   string          `json:"key"`
	Value json.RawMessage `json:"value"`
}

// Get subscribes to the view like a service's cache does (snapshot bootstrap from the
// player), waits until it is complete (and reflects WaitFor), and prints the row under Key
// — or every row, sorted by key, and a summary with the stream position and the source
// position the rows reflect. A missing key is an error naming the view and the key.
func Get(ctx context.Context, w io.Writer, o GetOptions) error {
	if err := CheckOutput(o.Output); err != nil {
		return err
	}
	var waitFor cacheclient.LSN
	if o.WaitFor != "" {
		var err error
		if waitFor, err = cacheclient.ParseLSN(o.WaitFor); err != nil {
			return fmt.Errorf("get: -wait-for: %w", err)
		}
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if o.Service == "" {
		o.Service = "cachectl"
	}
	cfg := cacheclient.Config{Addresses: o.Players, Stream: o.Stream, Service: o.Service, InstanceID: o.InstanceID, TLS: o.TLS}
	if o.Token != "" {
		cfg.Token = cacheclient.StaticToken(o.Token)
	}
	// A refusal that cannot heal (a grant, an unknown view or stream) stops the client and
	// ends WaitReady with the player's reason. The client retries credentials, which a
	// service's token source may rotate; Get's token does not change, so that refusal
	// ends Get at once too, rather than when the timeout runs out.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	hooks := cacheclient.Hooks{OnDisconnect: func(addr string, err error) {
		if errors.Is(err, cacheclient.ErrUnauthenticated) {
			cancel(err)
		}
	}}
	c, err := cacheclient.New(cfg, cacheclient.WithLogger(log), cacheclient.WithHooks(hooks))
	if err != nil {
		return err
	}
	view, err := cacheclient.Register(c, o.View, func(_ string, v []byte) (json.RawMessage, error) {
		return json.RawMessage(append([]byte(nil), v...)), nil
	}, cacheclient.WithFilter(o.Selection.Filter), cacheclient.WithShard(o.Selection.ShardIndex, o.Selection.ShardCount))
	if err != nil {
		return err
	}
	if err := c.Start(); err != nil {
		return err
	}
	defer c.Close()
	if err := c.WaitReady(ctx); err != nil {
		return fmt.Errorf("get: view %s of stream %s: %w", o.View, o.Stream, causeOf(ctx, err))
	}
	if o.WaitFor != "" {
		if err := c.WaitFor(ctx, waitFor); err != nil {
			return fmt.Errorf("get: view %s of stream %s: waiting for source position %s: %w", o.View, o.Stream, waitFor, causeOf(ctx, err))
		}
	}
	cut := c.Read()
	ver := view.In(cut)
	out := getJSON{Stream: o.Stream, View: o.View, Index: cut.Position(), Selection: o.Selection.String()}
	if p := cut.SourcePosition(); p != 0 {
		out.SourcePosition = p.String()
	}
	if o.Key != "" {
		v, ok := ver.Get(o.Key)
		if !ok {
			return fmt.Errorf("get: view %s has no key %q (at index %d%s)", o.View, o.Key, cut.Position(), sourceText(cut))
		}
		if o.Output == OutputJSON {
			out.Key, out.Value = o.Key, v
			return writeJSON(w, out)
		}
		_, err := fmt.Fprintf(w, "%s\n", v)
		return err
	}
	rows := []getRow{}
	ver.Range(func(k string, v json.RawMessage) bool { rows = append(rows, getRow{k, v}); return true })
	sort.Slice(rows, func(i, j int) bool { return rows[i].Key < rows[j].Key })
	if o.Output == OutputJSON {
		out.Rows = &rows
		return writeJSON(w, out)
	}
	for _, r := range rows {
		fmt.Fprintf(w, "%s\t%s\n", r.Key, r.Value)
	}
	sel := ""
	if !o.Selection.IsZero() {
		sel = " selected by " + o.Selection.String()
	}
	_, err = fmt.Fprintf(w, "-- view %s%s: %d row(s) at index %d%s\n", o.View, sel, len(rows), cut.Position(), sourceText(cut))
	return err
}

// causeOf is err, or the reason ctx was cancelled with when that is why it failed.
func causeOf(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) && !errors.Is(cause, context.DeadlineExceeded) {
		return cause
	}
	return err
}

// sourceText is ", source position X" when the rows reflect one (WAL capture), else "".
func sourceText(cut *cacheclient.Cut) string {
	if p := cut.SourcePosition(); p != 0 {
		return ", source position " + p.String()
	}
	return ""
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
