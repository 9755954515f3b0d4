package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/statecast/statecast/internal/faultproxy"
)

// findRepo walks up from the working directory to the module root.
func findRepo() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.Contains(string(b), "module github.com/statecast/statecast\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("chaos: no statecast go.mod above the working directory")
		}
		dir = parent
	}
}

// build compiles the distributor, the player and this harness's client program.
func (r *run) build(ctx context.Context) error {
	bin := filepath.Join(r.dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return err
	}
	args := []string{"build", "-o", bin + string(filepath.Separator)}
	if r.cfg.Race {
		args = append(args, "-race")
	}
	args = append(args, "./cmd/distributor", "./cmd/player", "./cmd/chaos")
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = r.cfg.Repo
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("chaos: go build: %v\n%s", err, out)
	}
	r.logf("built the distributor, the player and the client program (race detector: %v)", r.cfg.Race)
	return nil
}

// ports hands out the fixed ports of the run's servers (a process restarted by a fault
// listens where it did: its clients and proxies know only that address). They are taken
// below the kernel's ephemeral range, where no outgoing connection takes its local port:
// a port from the range, free when chosen, may be an outgoing connection's by the time
// its server restarts.
type ports struct {
	mu   sync.Mutex
	used map[int]bool
}

func (p *ports) port() (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.used == nil {
		p.used = map[int]bool{}
	}
	lo := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			_, _ = fmt.Sscan(f[0], &lo)
		}
	}
	for range 1000 {
		n := 10000 + rand.IntN(max(lo-10000, 1))
		if p.used[n] {
			continue
		}
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", n))
		if err != nil {
			continue
		}
		ln.Close()
		p.used[n] = true
		return n, nil
	}
	return 0, errors.New("chaos: no free port below the ephemeral range")
}

func (p *ports) addr() (string, error) {
	n, err := p.port()
	return fmt.Sprintf("127.0.0.1:%d", n), err
}

// clientViews are the subscriptions of the clients, in turn: all views, two subsets, all
// views again. Every other client has no state directory (a snapshot at every start).
var clientViews = [][]string{
	{"accounts", "rich", "items", "lines", "priced_lines", "category_stock", "ordered_items"},
	{"accounts", "rich", "items"},
	{"items", "lines", "priced_lines", "category_stock"},
	{"accounts", "rich", "items", "lines", "priced_lines", "category_stock", "ordered_items"},
}

// addProxy starts a proxy to target and keeps it under name, the hop's name in faults'
// targets.
func (r *run) addProxy(name, target string) (*faultproxy.Proxy, error) {
	p, err := faultproxy.New(target)
	if err != nil {
		return nil, err
	}
	r.proxies[name] = p
	return p, nil
}

// setup starts the servers, seeds the database and starts every process, each one
// reaching its server through its own proxy.
func (r *run) setup(ctx context.Context) error {
	for _, d := range []string{"logs", "conf", "state", "events"} {
		if err := os.MkdirAll(filepath.Join(r.dir, d), 0o755); err != nil {
			return err
		}
	}
	distNames, playerNames := []string{"dist-a", "dist-b"}, []string{"player-1", "player-2"}
	// A component's Kafka hop is one proxy per broker node: kafka/<component> for node 1,
	// kafka/<component>@<node> for the others (hopProxies finds them all).
	var listeners []kafkaListener
	for _, n := range append(slices.Clone(distNames), playerNames...) {
		for node := 1; node <= r.cfg.KafkaNodes; node++ {
			p, err := r.addProxy(kafkaHop(n, node), "")
			if err != nil {
				return err
			}
			port, err := r.ports.port()
			if err != nil {
				return err
			}
			listeners = append(listeners, kafkaListener{node: node, name: strings.ToUpper(strings.ReplaceAll(n, "-", "_")), port: port, proxy: p})
		}
	}
	var err error
	r.logf("starting PostgreSQL and Kafka (%d broker nodes; private state in %s)", r.cfg.KafkaNodes, r.dir)
	if r.pg, err = startPostgres(ctx, r.cfg.Repo, r.dir); err != nil {
		return err
	}
	if r.kafka, err = startKafka(ctx, r.cfg.Repo, r.dir, r.cfg.KafkaNodes, listeners); err != nil {
		return err
	}
	r.tap = startTap(r.tapCtx, r.kafka.Brokers)
	pgURL, err := url.Parse(r.pg.DSN)
	if err != nil {
		return err
	}
	admin, err := pgx.Connect(ctx, r.pg.DSN)
	if err != nil {
		return err
	}
	_, err = admin.Exec(ctx, "CREATE DATABASE chaos")
	admin.Close(ctx)
	if err != nil {
		return err
	}
	db := *pgURL
	db.Path = "/chaos"
	r.dbDSN = db.String()
	if r.pool, err = pgxpool.New(ctx, r.dbDSN); err != nil {
		return err
	}
	if err := seedData(ctx, r.pool, r.cfg.Writers); err != nil {
		return err
	}
	if r.sums, err = partitionSums(ctx, r.pool, r.cfg.Writers); err != nil {
		return err
	}

	// Distributors: the first becomes active, the second waits on the lock.
	for _, n := range distNames {
		pp, err := r.addProxy("pg/"+n, pgURL.Host)
		if err != nil {
			return err
		}
		dsn := db
		dsn.Host = pp.Addr()
		httpAddr, err := r.ports.addr()
		if err != nil {
			return err
		}
		r.http[n] = httpAddr
		conf, err := r.writeConf(n+".yaml", distributorConf(dsn.String(), r.kafkaAddrs(n), n, httpAddr, r.cfg.KafkaNodes))
		if err != nil {
			return err
		}
		p := r.newProc(n, "distributor", filepath.Join(r.dir, "bin", "distributor"), "-config", conf)
		r.dists = append(r.dists, p)
		if err := p.start(); err != nil {
			return err
		}
		if n == distNames[0] {
			if err := r.waitFor(ctx, 3*time.Minute, n+" active and the stream's first epoch published", func() bool {
				return r.distActive(n) && r.endOffset() > 0
			}); err != nil {
				return err
			}
		}
	}
	// Players.
	for _, n := range playerNames {
		grpcAddr, err := r.ports.addr()
		if err != nil {
			return err
		}
		httpAddr, err := r.ports.addr()
		if err != nil {
			return err
		}
		r.http[n] = httpAddr
		r.http[n+"/grpc"] = grpcAddr
		conf, err := r.writeConf(n+".yaml", playerConf(grpcAddr, httpAddr, r.kafkaAddrs(n), n))
		if err != nil {
			return err
		}
		p := r.newProc(n, "player", filepath.Join(r.dir, "bin", "player"), "-config", conf)
		r.players = append(r.players, p)
		if err := p.start(); err != nil {
			return err
		}
	}
	for _, n := range playerNames {
		if err := r.waitFor(ctx, 2*time.Minute, n+" ready", func() bool { return r.playerReady(n) }); err != nil {
			return err
		}
	}
	// Clients: each one reaches each player through a proxy of its own, the players in
	// another order for every other client.
	for i := range r.cfg.Clients {
		n := fmt.Sprintf("client-%d", i)
		var addrs []string
		for j := range playerNames {
			pn := playerNames[(i+j)%len(playerNames)]
			pp, err := r.addProxy(pn+"/"+n, r.http[pn+"/grpc"])
			if err != nil {
				return err
			}
			addrs = append(addrs, pp.Addr())
		}
		ctl, err := r.ports.addr()
		if err != nil {
			return err
		}
		r.http[n] = ctl
		cc := ClientConfig{ID: n, Stream: streamName, Players: addrs, Views: clientViews[i%len(clientViews)],
			Control: ctl, Events: filepath.Join(r.dir, "events", n+".jsonl")}
		if i%2 == 0 {
			cc.StateDir = filepath.Join(r.dir, "state", n)
		}
		r.views[n] = cc.Views
		b, _ := json.MarshalIndent(cc, "", "  ")
		conf, err := r.writeConf(n+".json", string(b))
		if err != nil {
			return err
		}
		p := r.newProc(n, "client", filepath.Join(r.dir, "bin", "chaos"), "client", "-config", conf)
		r.clients = append(r.clients, p)
		if err := p.start(); err != nil {
			return err
		}
	}
	for _, p := range r.clients {
		if err := r.waitFor(ctx, 2*time.Minute, p.name+" ready", func() bool {
			st, err := r.clientState(p.name)
			return err == nil && st.Stats.Ready
		}); err != nil {
			return err
		}
	}
	r.logf("all processes ready: 2 distributors, 2 players, %d clients; %d writers", len(r.clients), r.cfg.Writers)
	return nil
}

// kafkaHop names component's proxy to broker node (1…).
func kafkaHop(component string, node int) string {
	if node == 1 {
		return "kafka/" + component
	}
	return fmt.Sprintf("kafka/%s@%d", component, node)
}

// kafkaAddrs are the bootstrap addresses of a component: its proxy to every broker node.
func (r *run) kafkaAddrs(component string) []string {
	var out []string
	for _, p := range r.hopProxies("kafka/" + component) {
		out = append(out, p.Addr())
	}
	return out
}

// hopProxies are the proxies of a hop: one, or a Kafka hop's one per broker node.
func (r *run) hopProxies(hop string) []*faultproxy.Proxy {
	var out []*faultproxy.Proxy
	if p := r.proxies[hop]; p != nil {
		out = append(out, p)
	}
	for node := 2; strings.HasPrefix(hop, "kafka/"); node++ {
		p := r.proxies[fmt.Sprintf("%s@%d", hop, node)]
		if p == nil {
			break
		}
		out = append(out, p)
	}
	return out
}

func (r *run) newProc(name, kind, bin string, args ...string) *proc {
	p := &proc{name: name, kind: kind, bin: bin, args: args, log: filepath.Join(r.dir, "logs", name+".log")}
	p.onCrash = func(p *proc, msg string) {
		// The first few of a process; a crash loop is counted at the end.
		if len(p.crashes) <= maxCrashesListed {
			r.violate(Violation{Kind: "crash", Where: p.name, Detail: msg})
		} else {
			r.logf("%s crashed again (%d times)", p.name, len(p.crashes))
		}
	}
	r.procs[name] = p
	return p
}

func (r *run) writeConf(name, content string) (string, error) {
	path := filepath.Join(r.dir, "conf", name)
	return path, os.WriteFile(path, []byte(content), 0o600)
}

// distributorConf is a distributor's config (JSON is YAML). On a cluster of three nodes or
// more the stream's topic has replication factor 3 and min.insync.replicas=2 (what
// production asks: docs/kafka.md); the producer writes with acks=all.
func distributorConf(dsn string, brokers []string, id, httpAddr string, nodes int) string {
	var vs []map[string]any
	for _, v := range views {
		m := map[string]any{"name": v.Name, "sql": v.SQL, "key": v.Key}
		if v.Depends != nil {
			m["depends"] = v.Depends
		}
		vs = append(vs, m)
	}
	rf := min(nodes, 3)
	topicConfigs := map[string]string{"min.cleanable.dirty.ratio": "0.1"}
	if nodes >= 3 {
		topicConfigs["min.insync.replicas"] = "2"
	}
	b, _ := json.MarshalIndent(map[string]any{
		"postgres":  map[string]any{"dsn": dsn},
		"kafka":     map[string]any{"brokers": brokers, "client_id": id},
		"http_addr": httpAddr,
		"streams": []map[string]any{{
			"topic":              streamName,
			"replication_factor": rf,
			// Short segments and an eager cleaner: compaction runs during the run, so
			// resumes and snapshots meet a compacted log.
			"segment":          "30s",
			"delete_retention": "1h",
			"topic_configs":    topicConfigs,
			"views":            vs,
		}},
	}, "", "  ")
	return string(b)
}

// playerConf is a player's config: an ack timeout that a pause exceeds, and history and
// target budgets small enough that recoveries read from Kafka.
func playerConf(grpcAddr, httpAddr string, brokers []string, id string) string {
	b, _ := json.MarshalIndent(map[string]any{
		"listen": grpcAddr, "http_addr": httpAddr, "kafka": map[string]any{"brokers": brokers, "client_id": id},
		"streams":     []map[string]any{{"name": streamName}},
		"ack_timeout": ackTimeout.String(), "history_bytes": historyBytes, "target_budget_bytes": targetBudget,
		"shutdown_grace": "2s", "insecure": true,
		"admin": map[string]any{"addr": ""}, // two players on one host: no admin endpoint
	}, "", "  ")
	return string(b)
}
