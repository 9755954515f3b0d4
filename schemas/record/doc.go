// Package record holds the Go helpers of the statecast record contract described in
// schemas/README.md: record keys (EncodeKey, DecodeKey, control keys; KeyPrefix, JoinKey
// and SplitKey for readers that hold a row's key without its view prefix), record kinds
// and headers (Meta), control values (EpochBegin, EpochEnd, Poll, Position) and the
// row/epoch hashes (RowHash, RowHashPrefixed, EpochHash), and Time, the type a typed view
// decodes timestamptz, timestamp and date columns into (every PostgreSQL value, infinity
// and BC or five-digit years included). Everything that reads or writes records (the
// distributor, the player, cacheclient, the tools) uses these helpers: the format is
// written here only.
//
// The package is a light core: it depends on the standard library and xxhash only, so the
// cacheclient can embed it. Kafka-client glue lives in recordsarama, and the PostgreSQL row
// encoder (pgx) in pgjson.
//
// Concurrency: every function is safe for concurrent use; an EpochHash value is not (it is
// a plain accumulator owned by one goroutine).
//
// Files: key.go (record and control keys, view names, key escaping), kind.go (Kind),
// headers.go (Meta, the sc-* headers, MetaBuilder), control.go (the control values and
// their JSON), hash.go (RowHash, RowHashPrefixed, EpochHash, the hashes' text), pgtime.go
// (Time and its text), shard.go (Shard: the hash shard of a key), errors.go (the sentinels).
package record
