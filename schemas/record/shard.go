package record

import "github.com/cespare/xxhash/v2"

// Shard returns the hash shard of a record key among n shards: xxhash64 of the key's bytes
// (the whole Kafka record key, view prefix included: EncodeKey's output), mod n. A
// subscription that asks for shard i of n of a view receives exactly the rows whose key
// gives i; the n shards of a view partition its rows. n must be > 0.
func Shard(key []byte, n uint32) uint32 {
	return uint32(xxhash.Sum64(key) % uint64(n))
}

// ShardString is Shard of a key held as a string, without copying it.
func ShardString(key string, n uint32) uint32 {
	return uint32(xxhash.Sum64String(key) % uint64(n))
}
