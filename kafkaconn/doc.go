// Package kafkaconn is how statecast's components connect to Kafka: one Config (brokers,
// client id, timeout, TLS, SASL PLAIN/SCRAM) that a component embeds in its own
// configuration, and the sarama settings every component shares (the pinned protocol
// Version, NewConfig, the idempotent ProducerConfig).
//
// A component validates its Config once (Validate loads the TLS files, so a bad file is a
// start-up error naming its field; its errors wrap ErrConfig) and builds every sarama
// config it needs from it:
//
//	kc := kafkaconn.Config{Brokers: []string{"kafka-1:9092"}, ClientID: "my-service"}
//	if err := kc.Validate(); err != nil { … }
//	client, err := sarama.NewClient(kc.Brokers, kc.SaramaConfig())
//
// The distributor's and the player's files hold one (a `kafka:` block), saramapc.Config
// has one, and a command's flags fill one (RegisterFlags: the same fields, the password
// from a file or a variable only). A Config never prints its password (String).
//
// In YAML a Config is a `kafka:` block, as in the distributor's file (docs/operations.md):
//
//	kafka:
//	  brokers: [kafka-1:9093]
//	  client_id: statecast-distributor
//	  timeout: 10s
//	  tls: {enabled: true, ca_file: /etc/kafka/ca.pem}
//	  sasl: {mechanism: SCRAM-SHA-512, user: statecast, password: "${KAFKA_PASSWORD}"}
//
// Beside the connection, what the distributor and the player both need of a stream's
// topic: its last stable offset and the reads of what a read_committed consumer delivers
// up to it, which must not wait for the transaction markers that end a transactional log
// (CommittedOffsets, NextCommitted, ReadCommitted), the topic's ID, which tells a topic
// deleted and created again from the one an offset was read from (TopicID), and its
// configuration as the broker describes it (TopicConfig).
//
// Files: config.go (Config, TLS, SASL, Validate, the sarama configs built from a Config),
// flags.go (RegisterFlags; String, which hides the password), sarama.go (Version,
// NewConfig, ProducerConfig, TopicConfig), scram.go (the SCRAM client sarama asks for),
// committed.go (the committed reads and ErrLogStartMoved), topicid.go (TopicID,
// ErrTopicMissing), errors.go (ErrConfig). The package starts no goroutine of its own:
// ReadCommitted's consumer is closed before it returns.
package kafkaconn
