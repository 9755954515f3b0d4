package capture

import (
	"testing"
)

// TestFlushWAL: WAL that no commit follows (a non-transactional logical message; page
// pruning by readers is the same) is beyond the flushed position; FlushWAL flushes it, and
// a snapshot taken before records both positions.
func TestFlushWAL(t *testing.T) {
	ctx, conn, _ := openDB(t)
	var msg, flush LSN
	var msgText, flushText string
	if err := conn.QueryRow(ctx, `SELECT pg_logical_emit_message(false, 'statecast-test', 'unflushed')::text, pg_current_wal_flush_lsn()::text`).Scan(&msgText, &flushText); err != nil {
		t.Fatal(err)
	}
	var err error
	if msg, err = ParseLSN(msgText); err != nil {
		t.Fatal(err)
	}
	if flush, err = ParseLSN(flushText); err != nil {
		t.Fatal(err)
	}
	if flush >= msg {
		t.Fatalf("the message at %s was flushed at once (flush %s): the test no longer leaves WAL unflushed", msg, flush)
	}
	snap, err := BeginSnapshot(ctx, conn, nil)
	if err != nil {
		t.Fatal(err)
	}
	insert, snapFlush := snap.Insert, snap.Flush
	snap.Close(ctx)
	if insert < msg || snapFlush > insert {
		t.Fatalf("snapshot positions: insert %s, flush %s; the message ends at %s", insert, snapFlush, msg)
	}
	if err := FlushWAL(ctx, conn); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, `SELECT pg_current_wal_flush_lsn()::text`).Scan(&flushText); err != nil {
		t.Fatal(err)
	}
	if flush, err = ParseLSN(flushText); err != nil {
		t.Fatal(err)
	}
	if flush < msg {
		t.Fatalf("after FlushWAL the WAL is flushed to %s, short of the message at %s", flush, msg)
	}
}
