// Package recordsarama converts between the record contract (package record) and sarama's
// message types. It is a thin adapter; it holds no state and is safe for concurrent use.
package recordsarama

import (
	"github.com/IBM/sarama"

	"github.com/statecast/statecast/schemas/record"
)

// Headers returns m's headers as sarama producer headers.
func Headers(m record.Meta) []sarama.RecordHeader {
	hs := m.Headers()
	out := make([]sarama.RecordHeader, len(hs))
	for i, h := range hs {
		out[i] = sarama.RecordHeader(h)
	}
	return out
}

// ProducerMessage builds the message of one record: key, value (nil for a tombstone) and
// m's headers, on partition 0 of topic.
func ProducerMessage(topic string, key, value []byte, m record.Meta) *sarama.ProducerMessage {
	msg := &sarama.ProducerMessage{Topic: topic, Partition: 0, Key: sarama.ByteEncoder(key), Headers: Headers(m)}
	if value != nil {
		msg.Value = sarama.ByteEncoder(value)
	}
	return msg
}

// Meta reads the record Meta from a consumed message's headers.
func Meta(msg *sarama.ConsumerMessage) (record.Meta, error) {
	return MetaOf(msg.Headers)
}

// MetaOf reads the record Meta from consumer headers.
func MetaOf(headers []*sarama.RecordHeader) (record.Meta, error) {
	var b record.MetaBuilder
	for _, h := range headers {
		if h == nil {
			continue
		}
		if err := b.Add(h.Key, h.Value); err != nil {
			return record.Meta{}, err
		}
	}
	return b.Meta()
}

// IsTombstone reports whether a consumed message deletes its key (nil value).
func IsTombstone(msg *sarama.ConsumerMessage) bool { return msg.Value == nil }
