package chaos

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/IBM/sarama"

	"github.com/statecast/statecast/kafkaconn"
)

// The broker faults of a run on a cluster (Config.KafkaNodes > 1). Each one takes out one
// broker node at most, and the run waits after it until every partition of the stream and
// of the transaction state has all its replicas in sync again: one fault at a time is what
// replication factor 3 with min.insync.replicas=2 is made to survive, and two in a row
// before the first one healed would be two brokers lost (docs/kafka.md).

// wholeTimeout bounds the wait for every replica to be in sync after a broker fault.
const wholeTimeout = 3 * time.Minute

// brokerFault applies a broker fault, heals it and waits for the cluster to be whole.
func (r *run) brokerFault(ctx context.Context, f fault) error {
	if r.kafka.nodes < 2 {
		return fmt.Errorf("%s needs a cluster of brokers (KafkaNodes > 1)", f.Kind)
	}
	var node int
	if f.Kind == KindLeaderKill {
		leader, open, err := r.leaderInTxn(ctx, 15*time.Second)
		if err != nil {
			return err
		}
		node = leader
		if open {
			r.mu.Lock()
			r.leaderKillsInTxn++
			r.mu.Unlock()
			r.logf("  broker-%d leads the stream's partition, a transaction is open", node)
		} else {
			r.logf("  broker-%d leads the stream's partition; no transaction was open within 15s", node)
		}
	} else {
		n, err := strconv.Atoi(strings.TrimPrefix(f.Target, "broker-"))
		if err != nil || n < 1 || n > r.kafka.nodes {
			return fmt.Errorf("%s: no broker node %q", f.Kind, f.Target)
		}
		node = n
	}
	switch f.Kind {
	case KindBrokerKill, KindLeaderKill:
		if err := r.kafka.KillNode(ctx, node); err != nil {
			return err
		}
		sleep(ctx, f.Hold)
		if err := r.kafka.StartNode(ctx, node); err != nil {
			return err
		}
	case KindBrokerPause:
		if err := r.kafka.PauseNode(node); err != nil {
			return err
		}
		sleep(ctx, f.Hold)
		if err := r.kafka.ResumeNode(node); err != nil {
			return err
		}
	case KindBrokerWipe:
		if err := r.kafka.WipeNode(ctx, node); err != nil {
			return err
		}
		sleep(ctx, f.Hold)
		if err := r.kafka.StartNode(ctx, node); err != nil {
			return err
		}
	}
	r.waitWhole(ctx, f)
	if f.Kind == KindBrokerWipe {
		r.checkRefetched(node)
	}
	return nil
}

// checkRefetched checks that a wiped node holds the stream's partition again: its log
// directory has the partition with as many bytes as the others (compaction may differ a
// little), so that its place in the ISR is not a stale entry.
func (r *run) checkRefetched(node int) {
	admin, err := sarama.NewClusterAdmin(r.kafka.Brokers, adminConfig())
	if err != nil {
		r.logf("  describe log dirs: %v", err)
		return
	}
	defer admin.Close()
	ids := make([]int32, r.kafka.nodes)
	for i := range ids {
		ids[i] = int32(i + 1)
	}
	dirs, err := admin.DescribeLogDirs(ids)
	if err != nil {
		r.logf("  describe log dirs: %v", err)
		return
	}
	sizes := map[int32]int64{}
	var desc []string
	for _, id := range ids {
		size, found := int64(-1), false
		for _, d := range dirs[id] {
			for _, t := range d.Topics {
				if t.Topic != streamName {
					continue
				}
				for _, p := range t.Partitions {
					if p.PartitionID == 0 {
						size, found = p.Size, true
						desc = append(desc, fmt.Sprintf("broker-%d %d bytes (lag %d)", id, p.Size, p.OffsetLag))
					}
				}
			}
		}
		if !found {
			desc = append(desc, fmt.Sprintf("broker-%d none", id))
		}
		sizes[id] = size
	}
	r.logf("  %s-0 replicas: %s", streamName, strings.Join(desc, ", "))
	if sizes[int32(node)] <= 0 {
		r.violate(Violation{Kind: "re-replicate", Where: fmt.Sprintf("broker-%d", node),
			Detail: fmt.Sprintf("in the ISR again after its data directory was lost, but its replica of %s-0 is empty or missing: %s", streamName, strings.Join(desc, ", "))})
	}
}

// waitWhole waits until every partition of the stream and of the transaction state has
// all its replicas in its ISR; not within wholeTimeout is a violation (a broker that does
// not catch up, or a wiped one that does not fetch its partitions again).
func (r *run) waitWhole(ctx context.Context, f fault) {
	from := time.Now()
	var last string
	for {
		short, err := r.shortISR(ctx)
		if err == nil && short == "" {
			r.logf("  every replica in sync %v after the heal", time.Since(from).Round(100*time.Millisecond))
			return
		}
		if err != nil {
			last = err.Error()
		} else {
			last = short
		}
		if time.Since(from) > wholeTimeout || !sleep(ctx, 500*time.Millisecond) {
			break
		}
	}
	kind := "isr"
	if f.Kind == KindBrokerWipe {
		kind = "re-replicate"
	}
	r.violate(Violation{Kind: kind, Where: f.Target, Detail: fmt.Sprintf("after %s, replicas still out of sync after %v: %s", f, wholeTimeout, last)})
}

// adminConfig is the harness's Kafka client config: short timeouts, since a broker may be
// paused or down.
func adminConfig() *sarama.Config {
	cfg := kafkaconn.NewConfig("statecast-chaos-admin")
	cfg.Net.DialTimeout = 2 * time.Second
	cfg.Net.ReadTimeout = 5 * time.Second
	cfg.Net.WriteTimeout = 5 * time.Second
	cfg.Metadata.Retry.Max = 2
	return cfg
}

// shortISR describes the partitions of the stream and of the transaction state whose ISR
// lacks a replica ("" when there is none).
func (r *run) shortISR(_ context.Context) (string, error) {
	admin, err := sarama.NewClusterAdmin(r.kafka.Brokers, adminConfig())
	if err != nil {
		return "", err
	}
	defer admin.Close()
	metas, err := admin.DescribeTopics([]string{streamName, "__transaction_state"})
	if err != nil {
		return "", err
	}
	var short []string
	for _, m := range metas {
		if m.Err != sarama.ErrNoError {
			return "", fmt.Errorf("topic %s: %w", m.Name, m.Err)
		}
		for _, p := range m.Partitions {
			if len(p.Isr) < len(p.Replicas) {
				isr := slices.Clone(p.Isr)
				slices.Sort(isr)
				short = append(short, fmt.Sprintf("%s-%d: replicas %v, ISR %v, leader %d", m.Name, p.ID, p.Replicas, isr, p.Leader))
			}
		}
	}
	return strings.Join(short, "; "), nil
}

// leaderInTxn waits up to d for a transaction of the stream to be open (the partition's
// last stable offset below its high watermark) and returns the partition's leader then,
// and whether one was open.
func (r *run) leaderInTxn(ctx context.Context, d time.Duration) (int, bool, error) {
	cfg := adminConfig()
	cl, err := sarama.NewClient(r.kafka.Brokers, cfg)
	if err != nil {
		return 0, false, err
	}
	defer cl.Close()
	deadline := time.Now().Add(d)
	for {
		b, err := cl.Leader(streamName, 0)
		if err != nil {
			return 0, false, fmt.Errorf("leader of %s-0: %w", streamName, err)
		}
		hw, err1 := listOffset(b, cfg.Version, sarama.ReadUncommitted)
		lso, err2 := listOffset(b, cfg.Version, sarama.ReadCommitted)
		if err1 == nil && err2 == nil && lso < hw {
			return int(b.ID()), true, nil
		}
		if time.Now().After(deadline) || !sleep(ctx, 10*time.Millisecond) {
			return int(b.ID()), false, nil
		}
		if err1 != nil || err2 != nil {
			_ = cl.RefreshMetadata(streamName)
		}
	}
}

// listOffset is the stream partition's end offset as the leader b reports it: the high
// watermark (read_uncommitted) or the last stable offset (read_committed).
func listOffset(b *sarama.Broker, v sarama.KafkaVersion, iso sarama.IsolationLevel) (int64, error) {
	req := sarama.NewOffsetRequest(v)
	req.IsolationLevel = iso
	req.AddBlock(streamName, 0, sarama.OffsetNewest, 1)
	resp, err := b.GetAvailableOffsets(req)
	if err != nil {
		return 0, err
	}
	blk := resp.GetBlock(streamName, 0)
	if blk == nil {
		return 0, sarama.ErrIncompleteResponse
	}
	if blk.Err != sarama.ErrNoError {
		return 0, blk.Err
	}
	if len(blk.Offsets) == 0 {
		return blk.Offset, nil
	}
	return blk.Offsets[0], nil
}
