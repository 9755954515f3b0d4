package statuspage

import (
	"encoding/xml"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
)

// svgChart is what a test reads of a chart: its texts by class and its line's points.
type svgChart struct {
	texts  map[string]string
	points [][2]float64
	title  string
}

// parseChart parses the SVG of Chart as XML (it must be well-formed).
func parseChart(t *testing.T, svg string) svgChart {
	t.Helper()
	var doc struct {
		XMLName xml.Name `xml:"svg"`
		Class   string   `xml:"class,attr"`
		Title   string   `xml:"title"`
		Texts   []struct {
			Class string `xml:"class,attr"`
			Text  string `xml:",chardata"`
		} `xml:"text"`
		Polylines []struct {
			Points string `xml:"points,attr"`
		} `xml:"polyline"`
	}
	if err := xml.Unmarshal([]byte(svg), &doc); err != nil {
		t.Fatalf("the chart is not well-formed SVG: %v\n%s", err, svg)
	}
	if !strings.Contains(doc.Class, "spark") || !strings.Contains(doc.Class, "chart") {
		t.Errorf("class %q: the pages' CSS and the browser test select svg.chart and svg.spark", doc.Class)
	}
	c := svgChart{texts: map[string]string{}, title: doc.Title}
	for _, tx := range doc.Texts {
		if _, dup := c.texts[tx.Class]; dup {
			t.Errorf("two texts of class %q", tx.Class)
		}
		c.texts[tx.Class] = tx.Text
	}
	if len(doc.Polylines) > 1 {
		t.Errorf("%d polylines", len(doc.Polylines))
	}
	for _, pl := range doc.Polylines {
		for _, xy := range strings.Fields(pl.Points) {
			xs, ys, _ := strings.Cut(xy, ",")
			x, err1 := strconv.ParseFloat(xs, 64)
			y, err2 := strconv.ParseFloat(ys, 64)
			if err1 != nil || err2 != nil {
				t.Fatalf("point %q", xy)
			}
			c.points = append(c.points, [2]float64{x, y})
		}
	}
	return c
}

// TestChart: a chart of a known series has its y axis (bottom, middle and a round top in
// the series' unit), its time axis (the history's span to now) and its current value, and
// its line's points are the values on that scale, the last one at "now".
func TestChart(t *testing.T) {
	for _, tc := range []struct {
		name          string
		values        []float64
		unit          string
		lo, top       float64 // the axis's range the points must be drawn on
		min, mid, max string
		now           string
		title         string
	}{
		{"bytes", []float64{0, 512, 1024, 1536}, "B", 0, 2048, "0 B", "1 KiB", "2 KiB", "1.5 KiB",
			"now 1.5 KiB; min 0 B, max 1.5 KiB over the last 20s"},
		{"past 500 KiB", []float64{700 << 10}, "B", 0, 1 << 20, "0 B", "512 KiB", "1 MiB", "700 KiB", ""},
		{"byte rate", []float64{3 << 20, 7 << 20}, "B/s", 0, 10 << 20, "0 B/s", "5 MiB/s", "10 MiB/s", "7 MiB/s", ""},
		{"seconds", []float64{30, 90}, "s", 0, 120, "0s", "1m", "2m", "1m30s", ""},
		{"subsecond", []float64{0.12, 0.3}, "s", 0, 0.5, "0s", "250ms", "500ms", "300ms", ""},
		{"rate", []float64{0, 10.0 / 3}, "/s", 0, 5, "0/s", "2.5/s", "5/s", "3.33/s", ""},
		{"rows", []float64{120000, 123456}, "rows", 0, 200000, "0 rows", "100k rows", "200k rows", "123k rows", ""},
		{"zeros", []float64{0, 0, 0}, "entries", 0, 1, "0 entries", "0.5 entries", "1 entries", "0 entries", ""},
		{"negative", []float64{-3, 4}, "", -5, 5, "-5", "0", "5", "4", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := parseChart(t, string(Chart(tc.values, tc.unit)))
			want := map[string]string{"y-min": tc.min, "y-mid": tc.mid, "y-max": tc.max, "now": tc.now,
				"x-start": "-10 min", "x-mid": "-5 min", "x-end": "now"}
			for class, w := range want {
				if c.texts[class] != w {
					t.Errorf("%s: %q, want %q", class, c.texts[class], w)
				}
			}
			if tc.title != "" && c.title != tc.title {
				t.Errorf("title %q, want %q", c.title, tc.title)
			}
			if len(c.points) != len(tc.values) {
				t.Fatalf("%d points for %d values", len(c.points), len(tc.values))
			}
			step := (plotR - plotL) / float64(Samples-1)
			for i, p := range c.points {
				// x: one step per sample, the last at the right edge ("now").
				if wantX := plotR - step*float64(len(tc.values)-1-i); math.Abs(p[0]-wantX) > 0.06 {
					t.Errorf("point %d: x %.1f, want %.1f", i, p[0], wantX)
				}
				// y: the value read back from the axis's range.
				if v := tc.lo + (plotB-p[1])/(plotB-plotT)*(tc.top-tc.lo); math.Abs(v-tc.values[i]) > 0.06/(plotB-plotT)*(tc.top-tc.lo) {
					t.Errorf("point %d: y %.1f reads %g on the axis, want %g", i, p[1], v, tc.values[i])
				}
			}
		})
	}

	// A full history spans the whole time axis.
	full := make([]float64, Samples)
	if c := parseChart(t, string(Chart(full, "B"))); c.points[0][0] != plotL || c.points[Samples-1][0] != plotR {
		t.Errorf("a full history runs from x %.1f to %.1f, want %.1f to %.1f", c.points[0][0], c.points[Samples-1][0], plotL, plotR)
	}
	// No sample yet: the axes, no line, and a text that says so.
	c := parseChart(t, string(Chart(nil, "B")))
	if len(c.points) != 0 || c.texts["now"] != "no samples yet" || c.texts["y-max"] != "1 B" || c.texts["x-start"] != "-10 min" {
		t.Errorf("empty chart: %+v", c)
	}
}

func TestQuantity(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		unit string
		want string
	}{
		{0, "B", "0 B"}, {1023, "B", "1023 B"}, {1024, "B", "1 KiB"}, {1536, "B", "1.5 KiB"}, {600 << 20, "B", "600 MiB"},
		{3 << 30, "B", "3 GiB"}, {12.34, "B/s", "12.3 B/s"}, {2.5, "s", "2.5s"}, {3600, "s", "1h"}, {5400, "s", "1h30m"},
		{9999, "", "9999"}, {12345, "", "12.3k"}, {2.5e6, "records", "2.5M records"}, {1234.5, "/s", "1234/s"}, {0.125, "/s", "0.125/s"},
	} {
		if got := Quantity(tc.v, tc.unit); got != tc.want {
			t.Errorf("Quantity(%v, %q) = %q, want %q", tc.v, tc.unit, got, tc.want)
		}
	}
	if Span(10*time.Minute) != "10 min" || Span(30*time.Second) != "30 s" || Span(2*time.Hour) != "2 h" {
		t.Error(Span(10*time.Minute), Span(30*time.Second), Span(2*time.Hour))
	}
}
