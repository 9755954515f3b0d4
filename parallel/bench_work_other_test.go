//go:build !linux

package parallel

import "time"

// Outside Linux only time.Sleep is offered (see bench_work_linux_test.go).
var sleepers = map[string]func() (func(time.Duration), func()){
	"time.Sleep": func() (func(time.Duration), func()) { return time.Sleep, func() {} },
}

const defaultWork = "time.Sleep"
