// Package conformance is one scenario suite for every statecast client: it drives a client
// process (a small driver program per language) through the same scenarios against the
// real player and broker, and checks what the client applied.
//
// # Line protocol
//
// A driver reads JSON lines on stdin and writes JSON lines on stdout. The first line is its
// configuration: {"addresses":[…],"stream":"s","views":[…],"instance_id":"…",
// "service":"…","token":"…","ca_file":"…","cert_file":"…","key_file":"…",
// "no_listener":b,"selections":{view:{"filter":"…","shard_index":i,"shard_count":n,
// "columns":[…]}},"state_dir":"…","persist_interval_ms":n,"many":b} (empty members: the
// client's defaults; a state_dir is where the client keeps its state file, written every
// persist_interval_ms and at close; many: the client subscribes as a channel of a
// SubscribeMany stream (cacheclient.Many, the Java client's Many); a ca_file means TLS verified with
// that CA, a cert_file and key_file (PKCS #8) a client certificate; a view's selection is
// the part of it the client holds). It registers a raw view per name (the row's JSON text
// as it travels, of its selection) with a change listener (none with no_listener),
// starts, and writes {"event":"ready","applied":i,"elapsed_ms":n} once the initial state
// is complete (n: from the client's start; the Go driver also waits for its listener to
// have handled it, so that a close right after ready has a state to write), or {"event":"stopped","error":"…"} when
// the client stops for good (a refusal; the error names the view). Commands:
//
//   - {"cmd":"dump"}: {"event":"dump","applied":i,"ready":b,"views":{view:{key:json}}};
//   - {"cmd":"await_for","lsn":"X/Y"}: {"event":"reached","lsn":"X/Y"} once the client
//     reflects every commit up to that source position, or {"event":"error",…};
//   - {"cmd":"reselect","view":v,"selection":{…}}: changes the view's selection while the
//     client runs (a selection as in the configuration; null: the whole view) and writes
//     {"event":"reselected","view":v} once the client took it (the Java client: once the
//     new subscription's snapshot is applied), or {"event":"error",…};
//   - {"cmd":"close"}: closes the client and writes {"event":"closed","error":""} (the
//     error says what close left behind, such as threads), then exits.
//
// Changes come as {"event":"change","view":v,"key":k,"old":json|null,"new":json|null}.
//
// # Checks
//
// The clients subscribe through a recording proxy (proxy_test.go: Subscribe streams, and
// SubscribeMany streams whose channels it records by their Hello's client id) whose
// frames go to the delivery checker (internal/checker: ordered, unique, reliable, resumable against the
// topic read back; for a client that selects, against a model of its selections written
// in the test); each scenario also waits until the client holds exactly what was
// written (convergent), and checks the listener's per-key order.
//
// Files: doc.go; the suite is in test files: driver_test.go (driver processes: the Go one
// built from ./godriver, the Java one from clients/java's Maven build), proxy_test.go (the
// recording proxy), conformance_test.go (the environment and the scenarios).
package conformance
