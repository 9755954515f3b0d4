// Package chaos runs statecast whole under random faults and then checks that every cache
// equals PostgreSQL: a Jepsen-style run of real processes (`make chaos`, and a short seeded
// run in the tests).
//
// # What runs
//
// Its own PostgreSQL cluster and Kafka broker (deploy/local's scripts with private state
// directories: restarting them disturbs nothing else; the scripts keep data and ports
// across a restart) — or, with Config.KafkaNodes (make chaos-cluster), a KRaft cluster of
// that many combined broker/controller nodes (deploy/local/kafka-cluster.sh) on which the
// stream has replication factor 3 and min.insync.replicas=2 —, two distributors (cmd/distributor, WAL capture: one active, one
// standby on the advisory lock), two players (cmd/player), several client processes (the
// `chaos client` program: cacheclient with secondary indexes and, for every other one, a
// state directory, each subscribed to its own set of views and to both players), and
// writer goroutines on PostgreSQL: inserts, updates, deletes and multi-row transactions
// over five views (a filtered one, two joins, a composite key; views.go).
//
// Every hop goes through a TCP proxy of the run (internal/faultproxy), one per component
// and server, so that a fault hits one connection path: distributor⇄PostgreSQL,
// distributor⇄Kafka, player⇄Kafka, client⇄player. Kafka clients connect to the addresses
// the broker advertises, not to the one they were given; the broker therefore has one
// listener per proxied component, each advertising that component's proxy port
// (STATECAST_KAFKA_LISTENERS of deploy/local/kafka.sh), and every connection of the
// component, after the bootstrap too, goes through its proxy. On a cluster a component has
// one proxy per node (kafka/<component>, kafka/<component>@2, …), each advertised by its
// node's listener for the component; a fault on the component's Kafka hop hits them all.
//
// # Faults
//
// A plan drawn from the seed (faults.go; the run prints the seed, and the same seed replays
// the same plan): SIGKILL and restart of each kind of process; SIGSTOP/SIGCONT for longer
// than the players' ack timeout; connection resets and black holes (the proxy stops
// forwarding without closing; the held bytes flow when it heals) on every hop; a
// PostgreSQL restart (fast or immediate); a Kafka broker restart (graceful or SIGKILL);
// and the active distributor losing its lock while its Kafka hop is a black hole (its
// records in flight land after the standby took over). On a cluster, broker faults too
// (brokers.go): a node killed and restarted; the stream partition's leader killed while a
// transaction of the stream is open (its last stable offset below its high watermark); a
// node paused past the brokers' session timeout; a node's data directory lost (killed,
// wiped, formatted again with the cluster's ID, restarted empty: it fetches its partitions
// again). After each one the run waits until every replica of the stream and of the
// transaction state is in sync again (not within 3 minutes is a violation), so the next
// fault never meets a cluster short of two brokers. Faults run one after another.
//
// # Checks
//
// While the faults run: read-your-writes (a writer commits, takes the WAL insert position
// on its connection, reads back the rows it touched — each writer alone changes the rows
// its view rows depend on — and a client must show exactly them after WaitFor), and
// atomicity (money only moves between a writer's accounts: a Cut whose per-writer sums
// differ shows part of a transaction).
//
// After the faults healed and the writers stopped: every client reflects the last commit
// (time to converge), every client's every view equals the view's SQL row by row and its
// indexes agree with its rows, and no client's epoch-end hash check disagreed with its rows;
// along the stream (followed by a tap of the run) no row record carries an older row
// version than an earlier record of its key (every source row takes a version from one
// sequence on every change: an old row landing after a newer one, as a second writer of the
// stream after a lock loss would make, is a stale record); with the distributors stopped and the clients caught up with
// the stream's end, the delivery checker (internal/checker) replays what each client
// received — each client process appends every Hello it sends and every frame it receives
// to a file, before handling it, so a kill loses nothing it applied — against the topic:
// ordered, unique, resumable, reliable. No process may exit unless the run ended it (the
// supervisor restarts a crashed one and reports it), no log may hold a panic, a fatal
// error or a data race, and the players' and clients' resident memory stays within budget.
//
// # Files
//
// run.go holds the run's life (Config, Result, the sequence of phases, the helpers that
// ask the processes for their state); servers.go the run's own PostgreSQL and Kafka
// (deploy/local's scripts with private state: started, restarted, crashed, killed; a
// cluster's nodes one by one: killed, paused, wiped); brokers.go the broker faults and the
// wait for the replicas;
// setup.go builds the commands, starts the servers, proxies and processes and writes
// their configs; views.go the schema and the views; workload.go the
// writer workload (the seed data, each writer's partition of the rows, the transactions
// it draws and the view rows they must produce); writes.go the writers and the
// read-your-writes and atomicity probes; faults.go the plan; inject.go applies a fault
// and heals it; check.go the final checks; procs.go the supervised processes; client.go
// the `chaos client` program; tap.go the stream's tap.
//
// Violations name what, where and how: the client, the view, the key, the expected row and
// the one found. Result.Summary is one line: changes, faults by kind, violations, time to
// converge after the last fault.
package chaos
