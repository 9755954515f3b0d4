package distributor

import (
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/statecast/statecast/distributor/internal/capture"
)

// checkCapture fills and checks the capture settings of a stream.
func (s *StreamConfig) checkCapture(where string, bad func(string, ...any)) {
	switch s.Capture {
	case "":
		s.Capture = CaptureWAL
	case CaptureWAL, CapturePoll:
	default:
		bad("%s.capture: %q must be %q or %q", where, s.Capture, CaptureWAL, CapturePoll)
	}
	for _, f := range []struct {
		name string
		v    time.Duration
	}{{"position_interval", s.PositionInterval}, {"reread_debounce", s.RereadDebounce}} {
		if f.v < 0 {
			bad("%s.%s: %v is negative (0 takes the default)", where, f.name, f.v)
		}
	}
	if s.Capture == CapturePoll {
		if s.Slot != "" || s.Publication != "" || s.ReplicaIdentity != "" || s.ReadSettings != nil || s.ReadConnections != 0 {
			bad("%s: slot, publication, replica_identity, read_settings and read_connections are for capture: wal", where)
		}
		return
	}
	switch s.ReplicaIdentity {
	case "":
		s.ReplicaIdentity = ReplicaIdentityFull
	case ReplicaIdentityFull, ReplicaIdentityKeep:
	default:
		bad("%s.replica_identity: %q must be %q or %q", where, s.ReplicaIdentity, ReplicaIdentityFull, ReplicaIdentityKeep)
	}
	s.Defaults.checkNotPolling(where+".defaults", bad)
	if s.Slot == "" {
		s.Slot = slotName(s.Topic)
	} else if err := capture.CheckSlotName(s.Slot); err != nil {
		bad("%s.slot: %q must be 1 to %d lower-case letters, digits or _ (PostgreSQL's rule for slot names)", where, s.Slot, capture.MaxIdentifierLen)
	}
	if s.Publication == "" || s.managePublication {
		s.Publication = s.Slot
		s.managePublication = true
	} else if err := capture.CheckPublicationName(s.Publication); err != nil {
		bad("%s.publication: %v", where, strings.TrimPrefix(err.Error(), capture.ErrIdentifier.Error()+": "))
	}
	if s.ReadSettings == nil {
		s.ReadSettings = maps.Clone(DefaultReadSettings)
	}
	switch {
	case s.ReadConnections < 0:
		bad("%s.read_connections: %d is negative (0 takes the default)", where, s.ReadConnections)
	case s.ReadConnections == 0:
		s.ReadConnections = DefaultReadConnections
	}
	for _, name := range slices.Sorted(maps.Keys(s.ReadSettings)) {
		if !settingNameRE.MatchString(name) {
			bad("%s.read_settings: %q is not a PostgreSQL setting's name", where, name)
		} else if s.ReadSettings[name] == "" {
			bad("%s.read_settings.%s: empty value", where, name)
		}
	}
	if s.PositionInterval == 0 {
		s.PositionInterval = DefaultPositionInterval
	}
	if s.RereadDebounce == 0 {
		s.RereadDebounce = DefaultRereadDebounce
	}
}

// settingNameRE matches PostgreSQL's setting names (an extension's have a dot).
var settingNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$`)

// poolConns is how many connections the distributor's streams may hold at once: each
// stream's cycle or poll, its cycle's other readers and a background read, and a few for
// the rest (locks, checks).
func (c *Config) poolConns() int32 {
	n := 4
	for _, s := range c.Streams {
		n += 1 + max(s.ReadConnections, 1)
	}
	return int32(n)
}

// DefaultReadConnections is a wal stream's ReadConnections when its configuration sets none.
const DefaultReadConnections = 4

// DefaultReadSettings are a wal stream's ReadSettings when its configuration sets none.
var DefaultReadSettings = map[string]string{"random_page_cost": "1.1"}

// slotName derives a slot or publication name from a topic: statecast_<topic>, lower case,
// every other character as _, at most 63 characters (PostgreSQL's limit).
func slotName(topic string) string {
	b := []byte("statecast_" + strings.ToLower(topic))
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			b[i] = '_'
		}
	}
	return string(b[:min(len(b), 63)])
}

// checkCapture reports the view settings that do not belong to the stream's capture mode.
func (v *ViewConfig) checkCapture(capture, where string, bad func(string, ...any)) {
	if capture != CaptureWAL && capture != "" {
		if len(v.Tables) > 0 || len(v.Depends) > 0 {
			bad("%s: tables and depends are for capture: wal", where)
		}
		return
	}
	v.ViewSettings.checkNotPolling(where, bad)
	for t, cols := range v.Depends {
		if t == "" || len(cols) == 0 || slices.Contains(cols, "") {
			bad("%s.depends: table %q needs its key's column names", where, t)
		}
	}
}

// checkNotPolling reports the polling settings of a wal stream's view or defaults.
func (v *ViewSettings) checkNotPolling(where string, bad func(string, ...any)) {
	for _, f := range []struct {
		set  bool
		name string
	}{{v.Incremental != "", "incremental"}, {v.PollInterval != 0, "poll_interval"}, {v.Overlap.set, "overlap"}, {v.Listen != "", "listen"}} {
		if f.set {
			bad("%s.%s: a polling setting, but the stream captures the WAL (every change arrives by itself; set capture: poll on the stream to poll)", where, f.name)
		}
	}
}
