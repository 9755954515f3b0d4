package record

import "github.com/cespare/xxhash/v2"

// Shard returns the hash shard of a record key among n shards: xxhash64 of the key's bytes
// (the whole Kafka record key, view prefix included: EncodeKey's output), mod n. A
// subscription that asks for shard i of n of a view receives exactly the rows whose key
// gives i; the n shards of a view partition its rows. n must be > 0.
func Shard(key []byte, n uint32) uint32 {
	return ShardOfHash(xxhash.Sum64(key), n)
}

// ShardString is Shard of a key held as a string, without copying it.
func ShardString(key string, n uint32) uint32 {
	return ShardOfHash(KeyHash(key), n)
}

// KeyHash is the hash a key's shard is taken from (xxhash64 of its bytes): a holder of
// many keys may keep it, and take any key's shard with ShardOfHash, for any n.
func KeyHash(key string) uint64 { return xxhash.Sum64String(key) }

// ShardOfHash is the shard among n of a key whose KeyHash is h.
func ShardOfHash(h uint64, n uint32) uint32 { return uint32(h % uint64(n)) }
