package daemon

import "fmt"

// Number is what Default fills: counts, sizes and durations (time.Duration is an int64).
type Number interface {
	~int | ~int16 | ~int32 | ~int64
}

// Default applies the daemons' one rule for a number of their configs: zero means the
// documented default, so *v becomes def; a negative value is refused with an error naming
// field (its YAML path, streams[0].segment). It returns nil for a positive value, which it
// leaves as it is.
func Default[T Number](v *T, def T, field string) error {
	switch {
	case *v == 0:
		*v = def
	case *v < 0:
		return fmt.Errorf("%s: %v is negative (0 takes the default)", field, *v)
	}
	return nil
}
