package statuspage

import (
	"fmt"
	"html/template"
	"math"
	"strings"
	"time"
)

// The geometry of a chart (pixels): a gutter on the left for the y axis's labels, the plot,
// room on the right for the current value, and a line below for the time axis.
const (
	chartW, chartH = 304.0, 66.0
	plotL, plotR   = 74.0, 224.0 // the plot's left and right edges
	plotT, plotB   = 7.0, 50.0   // its top and bottom
	axisTextY      = 62.0        // the baseline of the time axis's labels
)

// Chart draws values, the samples of one series oldest first, as an inline SVG chart with
// its axes: on the y axis the range in unit (0, or the lowest value when one is negative, to
// a round number above the highest, and the middle of the two), on the x axis the time the
// history spans (Samples × Interval, "-10 min" to "now"; a series younger than that fills
// the right-hand part), and the current value in unit beside the line's last point. A
// number alone says little, and a line without axes only says that it moves: the axes say
// by how much, and the value what it is now. The unit is "B" (bytes, binary prefixes), "B/s",
// "s" (seconds, shown as durations), a unit starting with "/" ("/s", a rate of things),
// another word ("rows", "entries"), or "" for a bare number. An empty history draws the
// axes and says that there is no sample yet.
func Chart(values []float64, unit string) template.HTML {
	var b strings.Builder
	esc := template.HTMLEscapeString
	summary := "no samples yet"
	lo, top := 0.0, niceCeil(0, unit)
	if len(values) > 0 {
		vmin, vmax := math.Inf(1), math.Inf(-1)
		for _, v := range values {
			vmin, vmax = min(vmin, v), max(vmax, v)
		}
		lo = min(vmin, 0)
		if lo < 0 {
			lo = -niceCeil(-lo, unit)
		}
		top = niceCeil(vmax, unit)
		if top <= lo {
			top = lo + niceCeil(0, unit)
		}
		summary = fmt.Sprintf("now %s; min %s, max %s over the last %s", Quantity(values[len(values)-1], unit),
			Quantity(vmin, unit), Quantity(vmax, unit), Duration(time.Duration(len(values))*Interval))
	}
	// class spark: what the charts were called before they had axes, and what the browser
	// test selects.
	fmt.Fprintf(&b, `<svg class="spark chart" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="%s" font-size="10" font-family="system-ui,sans-serif">`,
		int(chartW), int(chartH), int(chartW), int(chartH), esc(summary))
	fmt.Fprintf(&b, `<title>%s</title>`, esc(summary))
	y := func(v float64) float64 { return plotB - (v-lo)/(top-lo)*(plotB-plotT) }

	// The y axis: a grid line and a label at the bottom, the middle and the top of the range.
	for _, tick := range []struct {
		class string
		v     float64
	}{{"y-min", lo}, {"y-mid", (lo + top) / 2}, {"y-max", top}} {
		ty := y(tick.v)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e2e8f0"/>`, plotL, ty, plotR, ty)
		fmt.Fprintf(&b, `<text class="%s" x="%.1f" y="%.1f" text-anchor="end" fill="#64748b">%s</text>`,
			tick.class, plotL-4, ty+3.5, esc(Quantity(tick.v, unit)))
	}
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#94a3b8"/>`, plotL, plotT, plotL, plotB)
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#94a3b8"/>`, plotL, plotB, plotR, plotB)
	// The x axis: the span of a full history, its middle, now.
	span := time.Duration(Samples) * Interval
	for _, tick := range []struct {
		class, anchor, text string
		x                   float64
	}{
		{"x-start", "start", "-" + Span(span), plotL},
		{"x-mid", "middle", "-" + Span(span/2), (plotL + plotR) / 2},
		{"x-end", "end", "now", plotR},
	} {
		fmt.Fprintf(&b, `<text class="%s" x="%.1f" y="%.1f" text-anchor="%s" fill="#64748b">%s</text>`, tick.class, tick.x, axisTextY, tick.anchor, tick.text)
	}

	if len(values) == 0 {
		fmt.Fprintf(&b, `<text class="now" x="%.1f" y="%.1f" text-anchor="middle" fill="#64748b">no samples yet</text></svg>`,
			(plotL+plotR)/2, (plotT+plotB)/2+3)
		return template.HTML(b.String())
	}
	b.WriteString(`<polyline fill="none" stroke="#2563eb" stroke-width="1.5" points="`)
	step := (plotR - plotL) / float64(Samples-1)
	x0 := plotR - step*float64(len(values)-1)
	var px, py float64
	for i, v := range values {
		px, py = x0+step*float64(i), y(v)
		fmt.Fprintf(&b, "%.1f,%.1f ", px, py)
	}
	// The last value as a dot (a series of one sample is visible too) and as a number
	// beside it.
	fmt.Fprintf(&b, `"/><circle cx="%.1f" cy="%.1f" r="2" fill="#2563eb"/>`, px, py)
	fmt.Fprintf(&b, `<text class="now" x="%.1f" y="%.1f" font-weight="600" fill="#1e3a8a">%s</text></svg>`,
		plotR+6, min(max(py+3.5, plotT+6), plotB+3), esc(Quantity(values[len(values)-1], unit)))
	return template.HTML(b.String())
}

// Quantity formats v in unit for a person (see Chart for the units): bytes with a binary
// prefix, seconds as a duration, a rate of bytes as bytes per second, anything else as a
// number (with k, M, G past ten thousand) and the unit.
func Quantity(v float64, unit string) string {
	switch {
	case unit == "B":
		return bytesShort(v)
	case unit == "B/s":
		return bytesShort(v) + "/s"
	case unit == "s":
		// "2m", not "2m0s": an axis's round values read as a clock's.
		d := Duration(time.Duration(v * float64(time.Second)))
		if h, ok := strings.CutSuffix(d, "h0m0s"); ok {
			return h + "h"
		}
		if m, ok := strings.CutSuffix(d, "m0s"); ok {
			return m + "m"
		}
		return d
	case unit == "":
		return count(v)
	case strings.HasPrefix(unit, "/"):
		return count(v) + unit
	default:
		return count(v) + " " + unit
	}
}

// count formats a number: up to ten thousand as Num does (integers as such, fractions with
// three significant digits), then with an SI prefix.
func count(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 1e12:
		return sig3(v/1e12) + "T"
	case a >= 1e9:
		return sig3(v/1e9) + "G"
	case a >= 1e6:
		return sig3(v/1e6) + "M"
	case a >= 1e4:
		return sig3(v/1e3) + "k"
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	default:
		return Num(v)
	}
}

// bytesShort formats a byte count with a binary prefix and at most three significant
// digits, without a trailing ".0" (an axis reads "2 MiB", not "2.0 MiB").
func bytesShort(v float64) string {
	a, exp := math.Abs(v), -1
	for a >= 1024 && exp < 5 {
		a /= 1024
		exp++
	}
	if exp < 0 {
		return count(v) + " B"
	}
	s := sig3(a)
	if v < 0 {
		s = "-" + s
	}
	return s + " " + string("KMGTPE"[exp]) + "iB"
}

// sig3 formats x with three significant digits, or as an integer from 100 on (never in
// exponent form), without trailing zeros.
func sig3(x float64) string {
	if math.Abs(x) >= 100 {
		return fmt.Sprintf("%.0f", x)
	}
	s := fmt.Sprintf("%.3g", x)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

// niceCeil returns a round number at least v (v ≥ 0) for the top of an axis in unit: 1, 2 or
// 5 times a power of ten; for bytes times a power of 1024 (up to 500); for seconds a
// duration a clock reads (15 s, 30 s, 1 min, 2 min, 5 min …). For 0 it is 1 of the unit.
func niceCeil(v float64, unit string) float64 {
	switch unit {
	case "B", "B/s":
		if v < 1024 {
			return decimalCeil(v)
		}
		base := 1.0
		for v/base >= 1024 {
			base *= 1024
		}
		// Past 500 of a unit the next is 1 of the next unit: "1 MiB", not "1000 KiB".
		m := decimalCeil(v / base)
		if m > 500 {
			return base * 1024
		}
		return m * base
	case "s":
		if v <= 1 {
			return decimalCeil(v)
		}
		for _, s := range []float64{2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 3 * 3600, 6 * 3600, 12 * 3600, 86400} {
			if v <= s {
				return s
			}
		}
		return 86400 * decimalCeil(v/86400)
	default:
		return decimalCeil(v)
	}
}

// decimalCeil returns the least of 1, 2 and 5 times a power of ten that is at least v (1
// for v ≤ 0).
func decimalCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		// A relative tolerance: 0.3/0.1 is 2.9999999999999996.
		if v <= m*p*(1+1e-9) {
			return m * p
		}
	}
	return 10 * p
}

// Span formats a span of time on an axis: "10 min", "30 s", "2 h".
func Span(d time.Duration) string {
	switch {
	case d >= time.Hour && d%time.Hour == 0:
		return fmt.Sprintf("%d h", d/time.Hour)
	case d >= time.Minute && d%time.Minute == 0:
		return fmt.Sprintf("%d min", d/time.Minute)
	default:
		return fmt.Sprintf("%s s", Num(d.Seconds()))
	}
}
