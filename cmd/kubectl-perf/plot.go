package main

import (
	"bufio"
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
)

// The plot's geometry, in SVG user units.
const (
	plotWidth   = 960.0
	plotLeft    = 80.0 // room for the y tick labels and the axis label
	plotRight   = 24.0
	plotTop     = 84.0 // title, abort line and legend
	panelHeight = 160.0
	panelGap    = 44.0 // x tick labels and the next panel's title
	plotBottom  = 44.0

	colorBaseline  = "#1f77b4"
	colorTreatment = "#ff7f0e"
	colorOther     = "#999999"
	colorToggle    = "#2ca02c"
	colorRevert    = "#7f7f7f"
	colorAbort     = "#d62728"
	colorSettle    = "#eeeeee"
	colorWarmup    = "#f6f1e4"
)

// plotPanel is one stacked panel: a metric over time.
type plotPanel struct {
	title string
	// lines gives a window's series in the panel's unit, nil when it has none.
	lines func(w perfv1.WindowStatus) []float64
	// point gives a window's single value (drawn at its midpoint) instead.
	point func(w perfv1.WindowStatus) (float64, bool)
}

func panelsFor(st perfv1.PerfExperimentStatus) []plotPanel {
	const mib = 1 << 20
	// A series that does not unpack is drawn as no line: the plot shows what
	// can be read.
	scaled := func(get func(perfv1.SeriesValues) []int64, div float64) func(perfv1.WindowStatus) []float64 {
		return func(w perfv1.WindowStatus) []float64 {
			if w.Series == nil {
				return nil
			}
			v, err := w.Series.Values()
			if err != nil {
				return nil
			}
			raw := get(v)
			out := make([]float64, len(raw))
			for i, v := range raw {
				out[i] = float64(v) / div
			}
			return out
		}
	}
	panels := []plotPanel{
		{title: "CPU (cores)", lines: scaled(func(v perfv1.SeriesValues) []int64 { return v.CPUMillicores }, 1000)},
		{title: "Memory, working set (MiB)", lines: scaled(func(v perfv1.SeriesValues) []int64 { return v.MemoryBytes }, mib)},
	}
	for _, w := range st.Windows {
		if w.Series != nil && w.Series.Heap != "" {
			panels = append(panels, plotPanel{title: "Heap in use (MiB)",
				lines: scaled(func(v perfv1.SeriesValues) []int64 { return v.HeapBytes }, mib)})
			break
		}
	}
	panels = append(panels, plotPanel{title: "p99 latency per window (ms)", point: func(w perfv1.WindowStatus) (float64, bool) {
		if w.Load == nil || w.Load.Requests == 0 {
			return 0, false
		}
		return w.Load.P99Ms, true
	}})
	return panels
}

// svg writes SVG elements; the first write error is kept and reported at the end.
type svg struct {
	w   *bufio.Writer
	err error
}

func (s *svg) printf(format string, a ...any) {
	if s.err == nil {
		_, s.err = fmt.Fprintf(s.w, format, a...)
	}
}

// text is escaped character data or attribute text.
func esc(t string) string {
	var b bytes.Buffer
	_ = xml.EscapeText(&b, []byte(t))
	return b.String()
}

func (s *svg) text(x, y float64, attrs, t string) {
	s.printf(`<text x="%.1f" y="%.1f" %s>%s</text>`+"\n", x, y, attrs, esc(t))
}

func (s *svg) vline(x, y0, y1 float64, color, dash, class string) {
	s.printf(`<line class="%s" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="1.5"%s/>`+"\n",
		class, x, y0, x, y1, color, dashAttr(dash))
}

func dashAttr(dash string) string {
	if dash == "" {
		return ""
	}
	return fmt.Sprintf(` stroke-dasharray="%s"`, dash)
}

// marker is a vertical line across all panels at a moment of the run.
type marker struct {
	at    float64 // seconds since the start
	label string
	color string
	dash  string
	class string
}

// writePlot draws the experiment's windows as an SVG: stacked panels sharing the
// x axis (minutes since the run's start), baseline and treatment windows in two
// colours, settle and warm-up periods shaded, and vertical lines where the toggle
// was applied and reverted and where the run was aborted.
func writePlot(out io.Writer, exp *perfv1.PerfExperiment) error {
	st := exp.Status
	t0, ok := plotStart(st)
	if !ok {
		return fmt.Errorf("experiment %s/%s has no timed windows to plot", exp.Namespace, exp.Name)
	}
	since := func(t time.Time) float64 { return t.Sub(t0).Seconds() }

	// The x domain: from the start to the last thing that happened.
	xMax := 60.0
	for _, w := range st.Windows {
		if w.Start == nil {
			continue
		}
		xMax = math.Max(xMax, windowEnd(w, since))
	}
	if st.Abort != nil {
		xMax = math.Max(xMax, since(st.Abort.At.Time))
	}
	if st.CompletionTime != nil {
		xMax = math.Max(xMax, since(st.CompletionTime.Time))
	}
	xStep := niceMinutes(xMax / 60)
	xMaxMin := math.Ceil(xMax/60/xStep) * xStep
	innerW := plotWidth - plotLeft - plotRight
	xOf := func(sec float64) float64 { return plotLeft + sec/60/xMaxMin*innerW }

	// Toggle moments: each settle window that follows a baseline starts when the
	// toggle is applied; each treatment window's end is when it is reverted.
	var markers []marker
	for i, w := range st.Windows {
		if w.Start == nil {
			continue
		}
		if w.Variant == perfv1.VariantSettle && i > 0 && st.Windows[i-1].Variant == perfv1.VariantBaseline {
			markers = append(markers, marker{since(w.Start.Time), "toggle on", colorToggle, "6 3", "toggle"})
		}
		// An aborted treatment is reverted at the abort, marked below.
		if w.Variant == perfv1.VariantTreatment && w.End != nil &&
			(st.Abort == nil || math.Abs(w.End.Sub(st.Abort.At.Time).Seconds()) > 30) {
			markers = append(markers, marker{since(w.End.Time), "revert", colorRevert, "2 3", "revert"})
		}
	}
	if st.Abort != nil {
		markers = append(markers, marker{since(st.Abort.At.Time), "abort", colorAbort, "", "abort"})
	}

	panels := panelsFor(st)
	height := plotTop + float64(len(panels))*panelHeight + float64(len(panels)-1)*panelGap + plotBottom
	bw := bufio.NewWriter(out)
	s := &svg{w: bw}
	s.printf(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	s.printf(`<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="Helvetica, Arial, sans-serif" font-size="11">`+"\n",
		plotWidth, height, plotWidth, height)
	s.printf(`<rect width="100%%" height="100%%" fill="white"/>` + "\n")
	title := fmt.Sprintf("perfexperiment %s/%s — phase %s, verdict %s", exp.Namespace, exp.Name, st.Phase, orDash(string(st.Verdict)))
	s.text(plotLeft, 20, `font-size="14" font-weight="bold"`, title)
	if st.Abort != nil {
		s.text(plotLeft, 36, `fill="`+colorAbort+`"`, fmt.Sprintf("aborted: %s: %s", st.Abort.Reason, st.Abort.Message))
	}
	writeLegend(s, plotLeft, 52, st.Abort != nil)

	for pi, p := range panels {
		top := plotTop + float64(pi)*(panelHeight+panelGap)
		bottom := top + panelHeight
		lo, hi, yStep := yRange(st, p)
		yOf := func(v float64) float64 { return bottom - (v-lo)/(hi-lo)*panelHeight }

		s.printf(`<g class="panel">` + "\n")
		s.text(plotLeft, top-6, `font-size="12" font-weight="bold" class="panel-title"`, p.title)
		// Shaded periods excluded from the results.
		for _, w := range st.Windows {
			if w.Start == nil || (w.Variant != perfv1.VariantSettle && w.Variant != perfv1.VariantWarmup) {
				continue
			}
			fill := colorSettle
			if w.Variant == perfv1.VariantWarmup {
				fill = colorWarmup
			}
			x0, x1 := xOf(since(w.Start.Time)), xOf(windowEnd(w, since))
			s.printf(`<rect class="%s" x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>`+"\n",
				w.Variant, x0, top, math.Max(x1-x0, 0), panelHeight, fill)
		}
		// Grid and y ticks.
		for v := lo; v <= hi+yStep/1e6; v += yStep {
			y := yOf(v)
			s.printf(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#dddddd" stroke-width="0.5"/>`+"\n", plotLeft, y, plotLeft+innerW, y)
			s.text(plotLeft-6, y+4, `text-anchor="end"`, tick(v, yStep))
		}
		// x ticks.
		for m := 0.0; m <= xMaxMin+xStep/1e6; m += xStep {
			x := xOf(m * 60)
			s.printf(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", x, bottom, x, bottom+4)
			s.text(x, bottom+16, `text-anchor="middle"`, tick(m, xStep))
		}
		s.printf(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="black"/>`+"\n", plotLeft, top, innerW, panelHeight)
		// Data.
		for _, w := range st.Windows {
			if w.Start == nil {
				continue
			}
			color := variantColor(w.Variant)
			start := since(w.Start.Time)
			if p.point != nil {
				v, ok := p.point(w)
				if !ok {
					continue
				}
				mid := (start + windowEnd(w, since)) / 2
				s.printf(`<circle class="%s" cx="%.1f" cy="%.1f" r="4" fill="%s"><title>%s</title></circle>`+"\n",
					w.Variant, xOf(mid), yOf(v), color, esc(fmt.Sprintf("stage %d %s: p99 %.1f ms", w.Stage, w.Variant, v)))
				continue
			}
			vals := p.lines(w)
			if len(vals) == 0 {
				continue
			}
			step := float64(w.Series.StepSeconds)
			var pts strings.Builder
			for i, v := range vals {
				fmt.Fprintf(&pts, "%.1f,%.1f ", xOf(start+float64(i)*step), yOf(v))
			}
			s.printf(`<polyline class="%s" points="%s" fill="none" stroke="%s" stroke-width="1.5"/>`+"\n",
				w.Variant, strings.TrimSpace(pts.String()), color)
		}
		// Moments.
		for _, m := range markers {
			x := xOf(m.at)
			s.vline(x, top, bottom, m.color, m.dash, m.class)
			if pi == 0 || m.class == "abort" {
				anchor := "start"
				if x > plotLeft+innerW-40 {
					anchor, x = "end", x-4
				}
				y := top + 11
				if m.class == "abort" {
					y = top + 24 // below the toggle labels it may be close to
				}
				s.text(x+2, y, fmt.Sprintf(`fill="%s" text-anchor="%s" class="%s-label"`, m.color, anchor, m.class), m.label)
			}
		}
		s.printf("</g>\n")
	}
	lastBottom := height - plotBottom
	s.text(plotLeft+innerW/2, lastBottom+34, `text-anchor="middle" font-size="12"`, "time since the experiment's start (minutes)")
	s.printf("</svg>\n")
	if s.err != nil {
		return s.err
	}
	return bw.Flush()
}

func writeLegend(s *svg, x, y float64, abort bool) {
	item := func(draw func(x float64), label string) {
		draw(x)
		s.text(x+26, y+4, "", label)
		x += 26 + 6*float64(len(label)) + 18
	}
	line := func(color, dash string) func(float64) {
		return func(x float64) {
			s.printf(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"%s/>`+"\n", x, y, x+20, y, color, dashAttr(dash))
		}
	}
	box := func(color string) func(float64) {
		return func(x float64) {
			s.printf(`<rect x="%.1f" y="%.1f" width="20" height="10" fill="%s" stroke="#cccccc"/>`+"\n", x, y-5, color)
		}
	}
	item(line(colorBaseline, ""), "baseline (toggle off)")
	item(line(colorTreatment, ""), "treatment (toggle on)")
	item(box(colorSettle), "settle")
	item(box(colorWarmup), "warm-up")
	item(line(colorToggle, "6 3"), "toggle applied")
	item(line(colorRevert, "2 3"), "reverted")
	if abort {
		item(line(colorAbort, ""), "abort")
	}
}

func variantColor(v perfv1.Variant) string {
	switch v {
	case perfv1.VariantBaseline:
		return colorBaseline
	case perfv1.VariantTreatment:
		return colorTreatment
	}
	return colorOther
}

// plotStart is the run's start: status.startTime, else the first window's start.
func plotStart(st perfv1.PerfExperimentStatus) (time.Time, bool) {
	var t0 time.Time
	for _, w := range st.Windows {
		if w.Start != nil && (t0.IsZero() || w.Start.Time.Before(t0)) {
			t0 = w.Start.Time
		}
	}
	if st.StartTime != nil && (t0.IsZero() || st.StartTime.Time.Before(t0)) {
		t0 = st.StartTime.Time
	}
	return t0, !t0.IsZero()
}

// windowEnd is when a window ended, in seconds since the start: its end, else the
// end of its series, else its start.
func windowEnd(w perfv1.WindowStatus, since func(time.Time) float64) float64 {
	start := since(w.Start.Time)
	if w.End != nil {
		return since(w.End.Time)
	}
	if w.Series != nil && w.Series.StepSeconds > 0 {
		return start + float64(w.Series.Points)*float64(w.Series.StepSeconds)
	}
	return start
}

// yRange is a panel's y axis: rounded bounds around its data and the tick step.
func yRange(st perfv1.PerfExperimentStatus, p plotPanel) (lo, hi, step float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, w := range st.Windows {
		if w.Start == nil {
			continue
		}
		if p.point != nil {
			if v, ok := p.point(w); ok {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
			continue
		}
		for _, v := range p.lines(w) {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	if math.IsInf(lo, 0) {
		return 0, 1, 0.25
	}
	nonNegative := lo >= 0
	span := hi - lo
	if span == 0 {
		span = math.Max(math.Abs(hi)*0.1, 1)
	}
	lo, hi = lo-0.05*span, hi+0.05*span
	if nonNegative && lo < 0 {
		lo = 0
	}
	step = niceStep((hi - lo) / 4)
	return math.Floor(lo/step) * step, math.Ceil(hi/step) * step, step
}

// niceStep rounds x up to 1, 2 or 5 times a power of ten.
func niceStep(x float64) float64 {
	e := math.Pow(10, math.Floor(math.Log10(x)))
	switch f := x / e; {
	case f <= 1:
		return e
	case f <= 2:
		return 2 * e
	case f <= 5:
		return 5 * e
	}
	return 10 * e
}

// niceMinutes is the x tick step for a run of the given minutes: at most 12 ticks.
func niceMinutes(total float64) float64 {
	for _, c := range []float64{1, 2, 5, 10, 15, 20, 30, 60, 120, 240, 480} {
		if total/c <= 12 {
			return c
		}
	}
	return niceStep(total / 12)
}

// tick formats a tick value with as many decimals as its step needs.
func tick(v, step float64) string {
	d := 0
	if step < 1 {
		d = int(math.Ceil(-math.Log10(step) - 1e-9))
	}
	if math.Abs(v) < step/1e6 {
		v = 0
	}
	return fmt.Sprintf("%.*f", d, v)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
