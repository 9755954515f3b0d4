package cacheclient

import (
	"fmt"
	"runtime/debug"
)

// A panic in the service's code that the client calls — a Decoder, an IndexFunc, a change
// handler — must not crash the service: the client recovers it, counts it
// (Stats.Panics), logs it with its stack, and goes on as for an error of that code: the
// row of a decoder or index function that panicked is refused like a row the decoder
// refused (kept out of the view until a later version of it decodes and indexes,
// DecodeErrors, OnDecodeError); a change handler's panic is a failed attempt (retried,
// then reported to OnHandlerError and skipped).

// PanicError is a recovered panic of the service's code. It matches ErrPanic.
type PanicError struct {
	// Func is what panicked: "decoder", "index function <name>" or "change handler".
	Func  string
	View  string
	Key   string
	Value any    // what was passed to panic
	Stack string // the goroutine's stack where it panicked
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("cacheclient: %s of view %q panicked on key %q: %v", e.Func, e.View, e.Key, e.Value)
}

// Unwrap makes errors.Is(err, ErrPanic) true.
func (e *PanicError) Unwrap() error { return ErrPanic }

// maxLoggedStacks bounds the recovered panics logged with their stack.
const maxLoggedStacks = 10

// recovered turns a recovered panic value into a *PanicError (nil for nil) and counts it.
func (c *Client) recovered(p any, fn, view, key string) error {
	if p == nil {
		return nil
	}
	err := &PanicError{Func: fn, View: view, Key: key, Value: p, Stack: string(debug.Stack())}
	if c != nil {
		// The first panics are logged with their stack; after that (a function that
		// panics on every row of a snapshot) without it: the count says how many.
		if n := c.st.panics.Add(1); n <= maxLoggedStacks {
			c.log.Error("panic in the service's code recovered", "func", fn, "view", view, "key", key, "panic", p, "stack", err.Stack)
		} else {
			c.log.Error("panic in the service's code recovered", "func", fn, "view", view, "key", key, "panic", p, "panics", n)
		}
	}
	return err
}

// decodeRow calls the view's decoder; a panic is returned as a *PanicError.
func (v *View[T]) decodeRow(key string, value []byte) (obj T, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = v.c.recovered(p, "decoder", v.name, key)
		}
	}()
	return v.decode(key, value)
}

// indexValues calls every index function on obj and returns their values in dst (reused:
// dst[:0] grown to one slot per index); a panic is returned as a *PanicError naming the
// index.
func (v *View[T]) indexValues(dst [][]string, key string, obj *T) (vals [][]string, err error) {
	if len(v.indexFns) == 0 {
		return dst[:0], nil
	}
	i := 0
	defer func() {
		if p := recover(); p != nil {
			err = v.c.recovered(p, "index function "+v.indexName(i), v.name, key)
		}
	}()
	vals = dst[:0]
	for i = range v.indexFns {
		vals = append(vals, v.indexFns[i](*obj))
	}
	return vals, nil
}

// indexName returns the name of index i.
func (v *View[T]) indexName(i int) string {
	for n, j := range v.indexNames {
		if j == i {
			return fmt.Sprintf("%q", n)
		}
	}
	return fmt.Sprint(i)
}
