package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/statecast/statecast/cacheclient"
)

type config struct {
	Addresses  []string `json:"addresses"`
	Stream     string   `json:"stream"`
	Views      []string `json:"views"`
	InstanceID string   `json:"instance_id"`
	Service    string   `json:"service"`
	Token      string   `json:"token"`
	CAFile     string   `json:"ca_file"`
	CertFile   string   `json:"cert_file"`
	KeyFile    string   `json:"key_file"`
	NoListener bool     `json:"no_listener"`
	// Selections: by view, the part of it the client holds.
	Selections    map[string]selection `json:"selections"`
	StateDir      string               `json:"state_dir"`
	PersistMillis int                  `json:"persist_interval_ms"`
	Many          bool                 `json:"many"` // subscribe as a channel of a SubscribeMany stream
}

type selection struct {
	Filter     string   `json:"filter"`
	ShardIndex uint32   `json:"shard_index"`
	ShardCount uint32   `json:"shard_count"`
	Columns    []string `json:"columns"`
}

// options are a selection's cacheclient options.
func (s selection) options() []cacheclient.ViewOption {
	var out []cacheclient.ViewOption
	if s.Filter != "" {
		out = append(out, cacheclient.WithFilter(s.Filter))
	}
	if s.ShardCount > 0 {
		out = append(out, cacheclient.WithShard(s.ShardIndex, s.ShardCount))
	}
	if len(s.Columns) > 0 {
		out = append(out, cacheclient.WithColumns(s.Columns...))
	}
	return out
}

type command struct {
	Cmd       string     `json:"cmd"`
	LSN       string     `json:"lsn"`
	View      string     `json:"view"`
	Selection *selection `json:"selection"`
}

var (
	outMu sync.Mutex
	out   = json.NewEncoder(os.Stdout)
)

func emit(v map[string]any) {
	outMu.Lock()
	defer outMu.Unlock()
	_ = out.Encode(v)
}

func str(s string, ok bool) any {
	if !ok {
		return nil
	}
	return s
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	if !in.Scan() {
		fmt.Fprintln(os.Stderr, "godriver: no config line on stdin")
		os.Exit(2)
	}
	var cfg config
	if err := json.Unmarshal(in.Bytes(), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "godriver: config line:", err)
		os.Exit(2)
	}
	ccfg := cacheclient.Config{Addresses: cfg.Addresses, Stream: cfg.Stream, Service: cfg.Service, InstanceID: cfg.InstanceID,
		BackoffMin: 10 * time.Millisecond, BackoffMax: 200 * time.Millisecond,
		StateDir: cfg.StateDir, PersistInterval: time.Duration(cfg.PersistMillis) * time.Millisecond}
	if cfg.CAFile != "" {
		t, err := cacheclient.TLSFiles(cfg.CAFile, cfg.CertFile, cfg.KeyFile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "godriver:", err)
			os.Exit(2)
		}
		ccfg.TLS = t
	}
	if cfg.Token != "" {
		ccfg.Token = cacheclient.StaticToken(cfg.Token)
	}
	var opts []cacheclient.Option
	if cfg.Many {
		many := cacheclient.NewMany()
		defer many.Close()
		opts = append(opts, cacheclient.WithMany(many))
	}
	c, err := cacheclient.New(ccfg, opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "godriver:", err)
		os.Exit(2)
	}
	views := map[string]*cacheclient.View[string]{}
	for _, name := range cfg.Views {
		v, err := cacheclient.Register(c, name, func(_ string, b []byte) (string, error) { return string(b), nil }, cfg.Selections[name].options()...)
		if err != nil {
			fmt.Fprintln(os.Stderr, "godriver:", err)
			os.Exit(2)
		}
		views[name] = v
		if cfg.NoListener {
			continue
		}
		// Ready once the listener has handled the initial state too: a Close drops the
		// changes still queued and writes the last state they all completed, so a driver
		// closed right after ready would otherwise write no state file when its listener
		// lagged (the Java client's close waits for its listeners instead).
		err = cacheclient.OnChange(v, func(_ context.Context, ch cacheclient.Change[string]) error {
			emit(map[string]any{"event": "change", "view": ch.View, "key": ch.Key,
				"old": str(ch.Old, ch.Op != cacheclient.OpCreate), "new": str(ch.New, ch.Op != cacheclient.OpDelete)})
			return nil
		}, cacheclient.WithInitialPass())
		if err != nil {
			fmt.Fprintln(os.Stderr, "godriver:", err)
			os.Exit(2)
		}
	}
	started := time.Now()
	if err := c.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "godriver:", err)
		os.Exit(2)
	}
	go func() {
		if err := c.WaitReady(context.Background()); err != nil {
			emit(map[string]any{"event": "stopped", "error": err.Error()})
			return
		}
		emit(map[string]any{"event": "ready", "applied": c.Position(), "elapsed_ms": time.Since(started).Milliseconds()})
	}()
	go func() {
		// A client that stops for good (a refusal) reports it without a wait.
		for c.Err() == nil {
			time.Sleep(20 * time.Millisecond)
		}
		emit(map[string]any{"event": "stopped", "error": c.Err().Error()})
	}()
	for in.Scan() {
		var cmd command
		if err := json.Unmarshal(in.Bytes(), &cmd); err != nil {
			emit(map[string]any{"event": "error", "error": "bad command: " + err.Error()})
			continue
		}
		switch cmd.Cmd {
		case "dump":
			cut := c.Read()
			dump := map[string]map[string]string{}
			for name, v := range views {
				m := map[string]string{}
				v.In(cut).Range(func(k, obj string) bool { m[k] = obj; return true })
				dump[name] = m
			}
			emit(map[string]any{"event": "dump", "applied": cut.Position(), "ready": c.Ready(), "views": dump})
		case "await_for":
			lsn, err := cacheclient.ParseLSN(cmd.LSN)
			if err != nil {
				emit(map[string]any{"event": "error", "error": err.Error()})
				continue
			}
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				if err := c.WaitFor(ctx, lsn); err != nil {
					emit(map[string]any{"event": "error", "error": err.Error()})
					return
				}
				emit(map[string]any{"event": "reached", "lsn": cmd.LSN})
			}()
		case "reselect":
			v := views[cmd.View]
			if v == nil {
				emit(map[string]any{"event": "error", "error": "no view " + cmd.View})
				continue
			}
			var opts []cacheclient.ViewOption
			if cmd.Selection != nil {
				opts = cmd.Selection.options()
			}
			if err := v.Reselect(opts...); err != nil {
				emit(map[string]any{"event": "error", "error": err.Error()})
				continue
			}
			emit(map[string]any{"event": "reselected", "view": cmd.View})
		case "close":
			err := c.Close()
			msg := ""
			if err != nil {
				msg = err.Error()
			}
			emit(map[string]any{"event": "closed", "error": msg})
			os.Exit(0)
		default:
			emit(map[string]any{"event": "error", "error": "unknown command " + cmd.Cmd})
		}
	}
	_ = c.Close()
}
