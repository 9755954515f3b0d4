package player

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/statecast/statecast/kafkaconn"
)

// tsMark is a sample of the log's timeline: the record at off was appended at ts.
type tsMark struct {
	off  int64
	prev int64 // offset of the record read before it (-1 for the first)
	ts   time.Time
}

// stream is one served stream: its main fetcher (run), the materialized copy, the
// dispatcher and the registered targets. mu guards everything below it; the lock order is
// stream.mu before target.mu.
type stream struct {
	p         *Player
	cfg       StreamConfig
	log       *slog.Logger
	client    sarama.Client // main fetcher and offset look-ups
	recClient sarama.Client // recovery fetchers (kept apart from the main fetcher's connection)
	// offClient: offset look-ups at admission, on a connection of their own: on the main
	// fetcher's they would wait behind its long-poll fetches (MaxWaitTime).
	offClient sarama.Client
	delay     prometheus.Observer // delivery delay histogram of this stream
	// offsetsHook replaces the Kafka offset look-up (tests that drive apply directly).
	offsetsHook func() (start, end int64, err error)
	// consumerHook replaces the sarama consumers of the main and recovery fetchers (tests
	// that close a partition consumer under them, as sarama does on an offset out of range).
	consumerHook func(client sarama.Client) (sarama.Consumer, error)

	current atomic.Int64 // index of the last entry dispatched (or read at start-up)

	mu sync.Mutex
	// The state (state.go): the phase, the current causes of an error, why the stream is
	// unavailable and when it is tried again, the last error whatever the state.
	phase     phase
	causes    [nCauses]string
	down      error     // phaseUnavailable: why (a Hello's refusal)
	retryAt   time.Time // phaseUnavailable: the next attempt
	settled   bool      // it served, or was found unavailable, once (Readiness)
	changed   chan struct{}
	lastErr   string
	lastErrAt time.Time

	retention time.Duration        // the tombstone horizon (delete.retention.ms)
	topic     []byte               // the topic's Kafka ID (nil: unknown), sent to targets
	rows      map[string]*rowStore // view -> its live rows (rowstore.go)
	position  *item                // the latest position record (nil: none read)
	posLSN    string               // its source position ("" when it has none)
	hist      history
	nrows     int
	timeline  []tsMark
	byView    map[string]map[*target]struct{} // the targets that receive the view whole
	sidx      map[string]*viewIndex           // the targets that select rows of the view
	allViews  map[*target]struct{}
	byClient  map[string]*target // by identity.key: principal and instance id
	terms     map[string]uint64  // by identity.key
	known     map[string]bool    // views seen in the log (checkViews)
	lastLog   time.Time          // log time of the last entry read
	lastOff   int64              // offset of the last entry read (-1 none)
}

func newStream(p *Player, cfg StreamConfig) *stream {
	s := &stream{
		p: p, cfg: cfg, log: p.log.With("stream", cfg.Name),
		changed:  make(chan struct{}),
		rows:     map[string]*rowStore{},
		byView:   map[string]map[*target]struct{}{},
		sidx:     map[string]*viewIndex{},
		allViews: map[*target]struct{}{},
		byClient: map[string]*target{},
		terms:    map[string]uint64{},
		known:    map[string]bool{},
		lastOff:  -1,
		hist:     history{max: p.cfg.HistoryBytes, evicted: -1},
	}
	s.current.Store(-1)
	s.delay = p.metrics.delay.WithLabelValues(cfg.Name)
	return s
}

// openClients opens the stream's Kafka clients: they live as long as the Player (sarama
// reconnects them to the brokers on its own), so that a target never holds a client that
// a restart of the stream closed. It fails when no broker answers.
func (s *stream) openClients() error {
	conn := s.p.cfg.kafka()
	kc := conn.SaramaConfig()
	kc.Consumer.MaxWaitTime = 100 * time.Millisecond
	kc.Consumer.Fetch.Default = 4 << 20
	for _, c := range []*sarama.Client{&s.client, &s.recClient, &s.offClient} {
		if *c != nil {
			continue
		}
		var err error
		if *c, err = sarama.NewClient(s.p.cfg.Kafka.Brokers, kc); err != nil {
			return err
		}
	}
	return nil
}

// attach checks that the stream's topic can be served — it exists and has one partition —
// and reads its topic ID and its tombstone horizon (delete.retention.ms). Its error (an
// unavailableError) names the stream, the topic and what is wrong with it.
func (s *stream) attach() error {
	topic := s.cfg.Topic
	id, err := kafkaconn.TopicID(s.client, topic)
	switch {
	case errors.Is(err, kafkaconn.ErrTopicMissing):
		return s.unavailable(err, "the topic does not exist (its distributor creates it; or create it compacted with one partition)")
	case err != nil:
		return s.unavailable(err, "")
	}
	// The partitions as the broker has them now: the topic may have been created again.
	if err := s.client.RefreshMetadata(topic); err != nil {
		return s.unavailable(err, "")
	}
	parts, err := s.client.Partitions(topic)
	if err != nil {
		return s.unavailable(err, "")
	}
	if len(parts) != 1 {
		return s.unavailable(errPartitions, fmt.Sprintf("the topic has %d partitions, a stream has exactly 1", len(parts)))
	}
	retention := s.p.cfg.DeleteRetention
	if retention <= 0 {
		retention = 24 * time.Hour // Kafka's default delete.retention.ms
	}
	defer func() {
		s.mu.Lock()
		s.topic, s.retention = topicBytes(id), retention
		s.mu.Unlock()
	}()
	admin, err := sarama.NewClusterAdminFromClient(s.client)
	if err != nil {
		return nil
	}
	// Not admin.Close(): it would close the shared client.
	entries, err := kafkaconn.TopicConfig(admin, topic, "delete.retention.ms", "max.message.bytes")
	if err != nil {
		s.log.Warn("describe topic config failed; using the default tombstone horizon", "err", err)
		return nil
	}
	for _, e := range entries {
		n, perr := strconv.ParseInt(e.Value, 10, 64)
		switch {
		case perr != nil:
		case e.Name == "delete.retention.ms" && s.p.cfg.DeleteRetention <= 0:
			retention = time.Duration(n) * time.Millisecond
		case e.Name == "max.message.bytes" && n > int64(s.p.cfg.MaxRecordBytes)-recordFrameOverhead:
			// The topic accepts records that the player skips (poison): say so when the
			// stream starts, rather than only when such a record arrives.
			s.log.Warn("the topic accepts records larger than max_record_bytes: such records will be skipped, never served; raise max_record_bytes and the clients' receive limit with it",
				"topic", topic, "max.message.bytes", n, "max_record_bytes", s.p.cfg.MaxRecordBytes)
		}
	}
	return nil
}

// errPartitions: the stream's topic has more than one partition (attach).
var errPartitions = errors.New("player: the topic has several partitions")

func (s *stream) close() {
	if s.offClient != nil {
		_ = s.offClient.Close()
	}
	if s.recClient != nil {
		_ = s.recClient.Close()
	}
	if s.client != nil {
		_ = s.client.Close()
	}
}

// offsets returns the log start offset and the last stable offset: the end of what the
// main fetcher (read_committed) can read now. The offset below it may be a transaction
// marker, never delivered.
func (s *stream) offsets() (start, end int64, err error) {
	if s.offsetsHook != nil {
		return s.offsetsHook()
	}
	return kafkaconn.CommittedOffsets(s.offClient, s.cfg.Topic, 0)
}

// newConsumer returns a sarama consumer on client (consumerHook's in tests).
func (s *stream) newConsumer(client sarama.Client) (sarama.Consumer, error) {
	if s.consumerHook != nil {
		return s.consumerHook(client)
	}
	return sarama.NewConsumerFromClient(client)
}

// consumerClosed returns why sarama closed pc's channels: it sends the error that made
// it give up (an offset out of range) to Errors, then closes Messages and Errors, and a
// select may see the closed Messages first. nil when pc gave no error.
func consumerClosed(pc sarama.PartitionConsumer) error {
	var err error
	for e := range pc.Errors() {
		if e != nil && err == nil {
			err = e.Err
		}
	}
	return err
}

// run is the stream's life until ctx ends: it attaches to the topic (attach), then runs
// the main fetcher (fetch: the paper's fetcher thread + Algorithm 3's caller), which reads
// the log from its start to build the materialized copy, marks the stream ready, then
// keeps reading the head and dispatching every entry. When the topic is deleted and created
// again (its topic ID changes), the main fetcher starts over on the new topic
// (replaceTopic). When the topic cannot be served (missing, several partitions, unreadable)
// or the main fetcher stops on an error (an offset out of range at the head: the log was
// truncated or replaced under the copy; a partition consumer that sarama closed), the
// stream alone is unavailable (fail: its targets end, a Hello is refused naming why) and
// run tries again with backoff (retryDelay), reading the topic from its start: the other
// streams of the player serve all along.
func (s *stream) run(ctx context.Context) {
	for attempt := 0; ; attempt++ {
		err := s.attach()
		if err == nil {
			s.attached()
			err = s.follow(ctx)
		}
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			err = s.unavailable(errors.New("player: the main fetcher stopped without an error"), "")
		}
		if s.isReady() {
			// It served until now: a new failure, not one more of a series. (Only this
			// goroutine changes whether the stream serves.)
			attempt = 0
		}
		wait := retryDelay(attempt)
		s.fail(err, time.Now().Add(wait))
		log := s.log.Warn
		if attempt == 0 {
			log = s.log.Error
		}
		log("stream unavailable; retrying", "topic", s.cfg.Topic, "err", err, "attempt", attempt+1, "retry_in", wait)
		if !sleepCtx(ctx, wait) {
			return
		}
	}
}

// follow runs the main fetcher on the topic, and on the topic created again in its place,
// until ctx ends or it fails. A topic created again is checked as the first one was
// (attach): it may have several partitions, and another tombstone horizon.
func (s *stream) follow(ctx context.Context) error {
	for {
		err := s.fetch(ctx)
		var tr *topicReplaced
		if !errors.As(err, &tr) {
			return err
		}
		s.replaceTopic(tr.id)
		if err := s.attach(); err != nil {
			return err
		}
	}
}

// sleepCtx waits d, or less when ctx ends first (false).
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// fetch is the main fetcher's reading of one topic (one topic ID): until ctx ends (nil),
// an error that stops it, or a *topicReplaced. An error of the partition consumer does
// not stop it (sarama retries): it is the stream's current cause (causeFetch) until the
// consumer delivers again or nothing it could deliver is left in the log.
func (s *stream) fetch(ctx context.Context) error {
	start, end, err := s.offsets()
	if err != nil {
		return s.unavailable(err, "log offsets: "+err.Error())
	}
	// A stream that is ready already (a replaced topic) dispatches every record of the new
	// one live, from its start: its main position is what it applied.
	loading := end > start && !s.isReady()
	if !s.isReady() {
		s.current.Store(end - 1)
	}
	s.mu.Lock()
	s.hist.evicted = start - 1 // the history starts with the first record read
	s.mu.Unlock()
	consumer, err := s.newConsumer(s.client)
	if err != nil {
		return s.unavailable(err, "")
	}
	defer consumer.Close()
	pc, err := consumer.ConsumePartition(s.cfg.Topic, 0, start)
	if err != nil {
		return s.unavailable(err, fmt.Sprintf("reading from offset %d: %v", start, err))
	}
	defer pc.AsyncClose()
	s.log.Info("main fetcher started", "topic", s.cfg.Topic, "log_start", start, "log_end", end)
	if !loading && !s.isReady() {
		s.markReady(start, end)
	}
	idle := time.NewTimer(loadProbe)
	defer idle.Stop()
	check := time.NewTicker(topicCheck)
	defer check.Stop()
	next := start // every record below next that the consumer delivers was applied
	s.mu.Lock()
	failing := s.causes[causeFetch] != "" // set by the fetch of a topic replaced since
	s.mu.Unlock()
	recovered := func(how string) {
		if was := s.clearCause(causeFetch); was != "" {
			s.log.Info("main fetcher reads again", "how", how, "last_error", was, "next", next)
		}
		failing = false
	}
	woken := map[*target]struct{}{}
	closed := func() error {
		if ctx.Err() != nil {
			return nil
		}
		cause := consumerClosed(pc)
		// The topic deleted and created again under it: the new one is served, not an error.
		if err := s.checkTopic(); err != nil {
			return err
		}
		if cause == nil {
			cause = errors.New("no error given")
		}
		return s.unavailable(cause, fmt.Sprintf("main fetcher: the partition consumer closed at offset %d: %v", s.current.Load()+1, cause))
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-check.C:
			if err := s.checkTopic(); err != nil {
				return err
			}
			if failing && s.caughtUp(next) {
				recovered("nothing left to read in the log")
			}
		case m, ok := <-pc.Messages():
			if !ok {
				return closed()
			}
			if failing {
				recovered("records delivered")
			}
			// Apply what the consumer already holds (up to a bound) before waking the
			// targets: under load their senders then build bigger batches (fewer writes).
			for n := 0; ; n++ {
				s.apply(m, !loading, woken)
				next = m.Offset + 1
				if loading && m.Offset >= end-1 {
					loading = false
					s.markReady(start, end)
				}
				if n >= 255 || len(pc.Messages()) == 0 {
					break
				}
				if m, ok = <-pc.Messages(); !ok {
					break
				}
			}
			for t := range woken {
				t.signal()
			}
			clear(woken)
			if loading {
				idle.Reset(loadProbe)
			}
		case e, ok := <-pc.Errors():
			if !ok {
				return closed()
			}
			// A deleted topic shows as errors first: is it still the same one?
			if err := s.checkTopic(); err != nil {
				return err
			}
			if errors.Is(e.Err, sarama.ErrOffsetOutOfRange) {
				return s.unavailable(e.Err, fmt.Sprintf("main fetcher: offset %d out of range (the log was truncated or replaced under the copy): %v", next, e.Err))
			}
			failing = true
			if s.setCause(causeFetch, "main fetcher: "+e.Err.Error()) {
				s.log.Error("main fetcher error", "err", e.Err, "next", next)
			}
		case <-idle.C:
			// The last offsets below end may be transaction markers or records of aborted
			// transactions, never delivered: the copy is complete when no record the
			// consumer would deliver is left below end.
			if !loading {
				break
			}
			n, err := kafkaconn.NextCommitted(s.offClient, s.cfg.Topic, 0, next, end)
			if err == nil && n >= end {
				loading = false
				s.markReady(start, end)
			} else {
				idle.Reset(loadProbe)
			}
		}
	}
}

// caughtUp reports whether the log holds no record at or after next that the main
// fetcher would deliver: a fetcher that reported errors and has nothing to read shows no
// record that it reads again, and this is how its error ends.
func (s *stream) caughtUp(next int64) bool {
	_, end, err := s.offsets()
	if err != nil {
		return false
	}
	if next >= end {
		return true
	}
	n, err := kafkaconn.NextCommitted(s.offClient, s.cfg.Topic, 0, next, end)
	return err == nil && n >= end
}

// loadProbe: while loading, how long the consumer may be quiet before the main fetcher
// asks whether records are still to come below the end it loads to.
const loadProbe = 100 * time.Millisecond

// topicCheck is how often the main fetcher checks that its topic is still the one it
// reads (the topic ID it started with): a topic deleted and created again starts its
// offsets over, and targets must not resume at offsets of the old one.
const topicCheck = 2 * time.Second

// topicReplaced: the stream's topic now has another topic ID.
type topicReplaced struct{ id sarama.Uuid }

func (e *topicReplaced) Error() string {
	return "player: topic replaced, new topic ID " + e.id.String()
}

// checkTopic compares the topic's ID with the one the stream serves: a *topicReplaced
// when it changed; nil when it is the same, missing (deleted and not created again yet:
// the copy is kept), unknown (no topic IDs), or the check failed (tried again). A missing
// topic and a failed check are the stream's current cause (causeTopic) until a check
// finds the topic again.
func (s *stream) checkTopic() error {
	s.mu.Lock()
	cur := s.topic
	s.mu.Unlock()
	if len(cur) == 0 {
		return nil
	}
	id, err := kafkaconn.TopicID(s.offClient, s.cfg.Topic)
	switch {
	case errors.Is(err, kafkaconn.ErrTopicMissing):
		if s.setCause(causeTopic, fmt.Sprintf("topic %q missing (deleted?): serving the last copy until it exists again", s.cfg.Topic)) {
			s.log.Warn("topic missing (deleted?): serving the last copy until it exists again", "topic", s.cfg.Topic)
		}
		return nil
	case err != nil:
		if s.setCause(causeTopic, "topic check: "+err.Error()) {
			s.log.Warn("topic check failed", "topic", s.cfg.Topic, "err", err)
		}
		return nil
	}
	if was := s.clearCause(causeTopic); was != "" {
		s.log.Info("topic check passes again", "topic", s.cfg.Topic, "last_error", was)
	}
	if id == (sarama.Uuid{}) || bytes.Equal(id[:], cur) {
		return nil
	}
	return &topicReplaced{id: id}
}

// replaceTopic starts the stream over on a new topic of the same name (run, after
// fetch found that the topic ID changed): the materialized copy and the history of the old
// topic are dropped, every target is ended (Unavailable: its client resubscribes, and its
// resume index, an offset of the old topic, gets ResyncRequired + a snapshot of the new
// one through Hello.topic_id), and the main fetcher reads the new topic from its start,
// dispatching every record live: a target admitted meanwhile gets the state read so far
// and then the rest as it comes.
func (s *stream) replaceTopic(id sarama.Uuid) {
	s.mu.Lock()
	old := s.topic
	s.topic = topicBytes(id)
	targets := s.resetLocked()
	s.mu.Unlock()
	s.log.Warn("topic deleted and created again: serving the new topic from its start; every target resyncs",
		"topic", s.cfg.Topic, "old_topic_id", formatTopicID(old), "topic_id", id.String(), "targets", len(targets))
	s.p.metrics.topicReplaced.WithLabelValues(s.cfg.Name).Inc()
	err := fmt.Errorf("%w: stream %s: topic %s was deleted and created again (topic ID %s)", ErrStreamUnavailable, s.cfg.Name, s.cfg.Topic, id)
	for _, t := range targets {
		t.suspend(err)
	}
}

// resetLocked drops the materialized copy and the history (replaceTopic, fail) and
// returns the registered targets, which the caller ends. s.mu held.
func (s *stream) resetLocked() []*target {
	s.rows = map[string]*rowStore{}
	s.position, s.posLSN = nil, ""
	s.nrows = 0
	s.hist = history{max: s.p.cfg.HistoryBytes, evicted: -1}
	s.timeline = nil
	s.lastLog, s.lastOff = time.Time{}, -1
	s.current.Store(-1)
	targets := make([]*target, 0, len(s.byClient))
	for _, t := range s.byClient {
		targets = append(targets, t)
	}
	return targets
}

// topicBytes is a topic ID as the protocol carries it (nil: unknown).
func topicBytes(id sarama.Uuid) []byte {
	if id == (sarama.Uuid{}) {
		return nil
	}
	return id[:]
}

// formatTopicID writes a topic ID as Kafka tools do.
func formatTopicID(b []byte) string {
	if len(b) != len(sarama.Uuid{}) {
		return fmt.Sprintf("%x", b)
	}
	return sarama.Uuid(b).String()
}

func (s *stream) register(t *target) {
	if t.views == nil {
		s.allViews[t] = struct{}{}
		return
	}
	for _, v := range t.views {
		if sel := t.selectionOf(v); sel != nil {
			x := s.sidx[v]
			if x == nil {
				x = newViewIndex()
				s.sidx[v] = x
			}
			x.add(t, sel)
			continue
		}
		m := s.byView[v]
		if m == nil {
			m = map[*target]struct{}{}
			s.byView[v] = m
		}
		m[t] = struct{}{}
	}
}

// remove unregisters t (after it was suspended).
func (s *stream) remove(t *target) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.allViews, t)
	for _, v := range t.views {
		if sel := t.selectionOf(v); sel != nil {
			if x := s.sidx[v]; x != nil {
				x.remove(t, sel)
				if len(x.all) == 0 {
					delete(s.sidx, v)
				}
			}
			continue
		}
		delete(s.byView[v], t)
		if len(s.byView[v]) == 0 {
			delete(s.byView, v)
		}
	}
	if s.byClient[t.key] == t {
		delete(s.byClient, t.key)
	}
	// Terms of gone clients are kept (a reconnect continues the count) but bounded.
	if len(s.terms) > maxRememberedTerms {
		for id := range s.terms {
			if _, live := s.byClient[id]; !live {
				delete(s.terms, id)
			}
		}
	}
}

// checkViews refuses a view the stream does not carry: neither seen in its log (rows,
// tombstones, control records; compaction keeps each view's epoch records) nor declared
// in StreamConfig.Views. The stream must be ready (its log read).
func (s *stream) checkViews(views []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range views {
		if !s.known[v] && !matchAny(s.cfg.Views, v) {
			return fmt.Errorf("%w: %q is not a view of stream %q (a misspelt name, or a view not published yet)", ErrUnknownView, v, s.cfg.Name)
		}
	}
	return nil
}

// progressLoop checks the targets' health (target.healthCheck: an ack time-out or a send
// blocked on a client that does not read suspends the target) and wakes the senders that
// owe their target a progress message (the paper's dummy entries): one ticker per stream,
// not one per target.
func (s *stream) progressLoop(ctx context.Context) {
	tick := time.NewTicker(min(s.p.cfg.ProgressInterval/4, s.p.cfg.AckTimeout/4, 250*time.Millisecond))
	defer tick.Stop()
	var ts []*target
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			s.mu.Lock()
			ts = ts[:0]
			for _, t := range s.byClient {
				ts = append(ts, t)
			}
			s.mu.Unlock()
			ci := s.current.Load()
			for _, t := range ts {
				if err := t.healthCheck(now); err != nil {
					t.suspend(err)
				} else if t.progressDue(now, ci) {
					t.signal()
				}
			}
			clear(ts)
		}
	}
}

// maxRememberedTerms bounds the terms remembered for disconnected client ids.
const maxRememberedTerms = 100_000

// targetsSnapshot lists the registered targets.
func (s *stream) targetsSnapshot() []*target {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*target, 0, len(s.byClient))
	for _, t := range s.byClient {
		out = append(out, t)
	}
	return out
}
