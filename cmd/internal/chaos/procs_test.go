package chaos

import "testing"

// TestCrashLooping: a process is crash-looping when n of its last n+1 starts crashed, not
// when it crashed n times over a long run.
func TestCrashLooping(t *testing.T) {
	for _, c := range []struct {
		name   string
		starts int
		crash  []int
		want   bool
	}{
		{"never crashed", 12, nil, false},
		{"every start, the next one running", 11, []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, true},
		{"every start, the last one crashed", 10, []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, true},
		{"ten crashes over a long run", 40, []int{2, 6, 9, 13, 17, 21, 25, 29, 33, 37}, false},
		{"nine in a row", 10, []int{2, 3, 4, 5, 6, 7, 8, 9, 10}, false},
		{"ten of the last eleven", 12, []int{1, 2, 3, 4, 5, 7, 8, 9, 10, 11, 12}, true},
		{"two good starts among the last twelve", 12, []int{1, 2, 3, 4, 5, 7, 8, 9, 10, 12}, false},
	} {
		p := &proc{starts: c.starts, crashStarts: c.crash}
		if got := p.crashLooping(10); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
