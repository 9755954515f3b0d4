package saramapc

import (
	"errors"
	"fmt"
	"time"

	"github.com/IBM/sarama"

	"github.com/statecast/statecast/internal/backoff"
	"github.com/statecast/statecast/parallel"
)

// coordinator sends offset requests to the group coordinator, refreshing it once when the
// broker says it moved.
type coordinator struct {
	client sarama.Client
	conf   *sarama.Config
	group  string
}

func retriable(err error) bool {
	return errors.Is(err, sarama.ErrNotCoordinatorForConsumer) || errors.Is(err, sarama.ErrConsumerCoordinatorNotAvailable) ||
		errors.Is(err, sarama.ErrOffsetsLoadInProgress)
}

// unstableWait bounds how long Fetch waits for a transaction that is committing offsets of
// the partition to end (at most the producer's transaction timeout, when it crashed).
const unstableWait = 30 * time.Second

// unstableBackoff is the wait between the offset fetches that found an unstable offset:
// jittered, from 50ms doubling to 1s.
var unstableBackoff = backoff.Policy{Min: 50 * time.Millisecond, Max: time.Second}

// Fetch returns the committed offset (-1 if none) and metadata of topic/partition. Under
// read_committed it asks for a stable offset (require_stable): while a transaction that
// commits an offset of the partition is still open, the broker answers
// UNSTABLE_OFFSET_COMMIT and Fetch waits, so a new owner never starts below offsets that a
// transaction is about to commit.
func (c *coordinator) Fetch(topic string, partition int32) (int64, string, error) {
	var lastErr error
	start := time.Now()
	unstable := backoff.New(unstableBackoff)
	for attempt := 0; attempt < 3; attempt++ {
		b, err := c.client.Coordinator(c.group)
		if err != nil {
			return 0, "", err
		}
		req := sarama.NewOffsetFetchRequest(c.conf.Version, c.group, map[string][]int32{topic: {partition}})
		req.RequireStable = c.conf.Consumer.IsolationLevel == sarama.ReadCommitted && req.Version >= 7
		resp, err := b.FetchOffset(req)
		if err != nil {
			_ = b.Close()
			lastErr = err
			_ = c.client.RefreshCoordinator(c.group)
			continue
		}
		if resp.Version >= 8 && len(resp.Groups) > 0 && resp.Groups[0].Err != sarama.ErrNoError {
			err = resp.Groups[0].Err
		} else if resp.Err != sarama.ErrNoError {
			err = resp.Err
		}
		blk := resp.GetBlock(topic, partition)
		if err == nil && blk == nil {
			err = fmt.Errorf("no block for %s/%d", topic, partition)
		}
		if err == nil && blk.Err != sarama.ErrNoError {
			err = blk.Err
		}
		if err != nil {
			lastErr = err
			if errors.Is(err, sarama.ErrUnstableOffsetCommit) && time.Since(start) < unstableWait {
				attempt-- // not the coordinator's fault: wait for the transaction to end
				time.Sleep(unstable.Next())
				continue
			}
			if retriable(err) {
				_ = c.client.RefreshCoordinator(c.group)
				continue
			}
			return 0, "", fmt.Errorf("saramapc: fetch offset: %w", err)
		}
		return blk.Offset, blk.Metadata, nil
	}
	return 0, "", fmt.Errorf("saramapc: fetch offset: %w", lastErr)
}

// Commit commits offset and metadata for topic/partition as member of generation (use
// sarama.GroupGenerationUndefined and "" outside a group session, e.g. in tools and tests).
func (c *coordinator) Commit(generation int32, member, topic string, partition int32, p parallel.Progress) error {
	var lastErr error
	for range 3 {
		b, err := c.client.Coordinator(c.group)
		if err != nil {
			return err
		}
		req := sarama.NewOffsetCommitRequest(c.conf, c.group)
		req.ConsumerGroupGeneration = generation
		req.ConsumerID = member
		req.AddBlock(topic, partition, p.Watermark, 0, p.Metadata)
		resp, err := b.CommitOffset(req)
		if err != nil {
			_ = b.Close()
			lastErr = err
			_ = c.client.RefreshCoordinator(c.group)
			continue
		}
		kerr := resp.Errors[topic][partition]
		if kerr == sarama.ErrNoError {
			return nil
		}
		lastErr = kerr
		if retriable(kerr) {
			_ = c.client.RefreshCoordinator(c.group)
			continue
		}
		break
	}
	return fmt.Errorf("saramapc: commit %s/%d@%d: %w", topic, partition, p.Watermark, lastErr)
}

// CommitProgress commits p for topic/partition outside a group session (generation -1), for
// tools and tests: the broker accepts it only while the group has no active members.
func CommitProgress(client sarama.Client, group, topic string, partition int32, p parallel.Progress) error {
	c := &coordinator{client: client, conf: client.Config(), group: group}
	return c.Commit(sarama.GroupGenerationUndefined, "", topic, partition, p)
}

// FetchCheckpoint returns the committed checkpoint of topic/partition (Watermark -1 if none).
func FetchCheckpoint(client sarama.Client, group, topic string, partition int32) (parallel.Checkpoint, error) {
	c := &coordinator{client: client, conf: client.Config(), group: group}
	off, meta, err := c.Fetch(topic, partition)
	if err != nil || off < 0 {
		return parallel.Checkpoint{Watermark: off}, err
	}
	return parallel.DecodeCheckpoint(off, meta)
}
