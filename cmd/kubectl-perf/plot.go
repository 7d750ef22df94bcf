package main

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"path/filepath"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
)

// The plot is drawn with gonum.org/v1/plot: stacked panels sharing the time
// axis, then the per-stage overheads with their 95 % intervals.
var (
	colorBaseline  = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	colorTreatment = color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}
	colorOther     = color.RGBA{R: 0x99, G: 0x99, B: 0x99, A: 0xff}
	colorToggle    = color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}
	colorRevert    = color.RGBA{R: 0x7f, G: 0x7f, B: 0x7f, A: 0xff}
	colorAbort     = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
	colorLimit     = color.RGBA{R: 0x8c, G: 0x00, B: 0x00, A: 0xff}
	// Shades are translucent (non-premultiplied), under the lines.
	shadeBaseline  = color.NRGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0x1c}
	shadeTreatment = color.NRGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0x1c}
	shadeSettle    = color.NRGBA{R: 0x80, G: 0x80, B: 0x80, A: 0x30}
	shadeWarmup    = color.NRGBA{R: 0xc8, G: 0xa0, B: 0x40, A: 0x30}
	// The overhead panel's metrics, apart from the variants' colours.
	colorCPU    = color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff}
	colorMemory = color.RGBA{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff}
	colorP99    = color.RGBA{R: 0x17, G: 0xbe, B: 0xcf, A: 0xff}
)

const (
	plotWidth    = 26 * vg.Centimeter
	panelHeight  = 6 * vg.Centimeter
	headerHeight = 3 * vg.Centimeter // the title and the legend
	mib          = 1 << 20
)

// plotPanel is one stacked panel: a metric over time.
type plotPanel struct {
	title string
	// lines gives a window's series in the panel's unit, nil when it has none.
	lines func(w perfv1.WindowStatus) []float64
	// point gives a window's single value (drawn at its midpoint) instead.
	point func(w perfv1.WindowStatus) (float64, bool)
	// limit, when > 0, is drawn as a horizontal line labelled limitLabel.
	limit      float64
	limitLabel string
}

func panelsFor(st perfv1.PerfExperimentStatus) []plotPanel {
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
			for i, x := range raw {
				out[i] = float64(x) / div
			}
			return out
		}
	}
	memory := plotPanel{title: "Memory, working set (MiB)", lines: scaled(func(v perfv1.SeriesValues) []int64 { return v.MemoryBytes }, mib)}
	if m := st.Measurement; m != nil && m.MemoryLimitBytes > 0 {
		memory.limit = float64(m.MemoryLimitBytes) * float64(max(m.Replicas, 1)) / mib
		memory.limitLabel = fmt.Sprintf("memory limit (%d pods)", max(m.Replicas, 1))
	}
	panels := []plotPanel{
		{title: "CPU (cores)", lines: scaled(func(v perfv1.SeriesValues) []int64 { return v.CPUMillicores }, 1000)},
		memory,
	}
	for _, w := range st.Windows {
		if w.Series != nil && w.Series.Heap != "" {
			panels = append(panels, plotPanel{title: "Heap in use (MiB)",
				lines: scaled(func(v perfv1.SeriesValues) []int64 { return v.HeapBytes }, mib)})
			break
		}
	}
	for _, w := range st.Windows {
		if w.Series != nil && w.Series.GC != "" {
			panels = append(panels, plotPanel{title: "Time in GC (ms per second)",
				lines: scaled(func(v perfv1.SeriesValues) []int64 { return v.GCMicrosPerSecond }, 1000)})
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

// marker is a vertical line across the time panels at a moment of the run.
type marker struct {
	at    float64 // minutes since the start
	label string
	color color.Color
	dash  []vg.Length
}

// writePlot draws the run as SVG or PNG (format "svg" or "png"): the time
// panels (CPU, memory with its limit, heap when exported, p99 per window) with
// the baseline and treatment windows in two colours, every window shaded and
// labelled with its stage and QPS, the toggle, revert and abort moments
// marked; then the overhead of each stage with its 95 % interval. The status
// keeps the target's totals, so each line is the sum over its pods.
func writePlot(out io.Writer, exp *perfv1.PerfExperiment, format string) error {
	st := exp.Status
	t0, ok := plotStart(st)
	if !ok {
		return fmt.Errorf("experiment %s/%s has no timed windows to plot", exp.Namespace, exp.Name)
	}
	minutes := func(t time.Time) float64 { return t.Sub(t0).Minutes() }
	markers := runMarkers(st, minutes)
	var plots [][]*plot.Plot
	for _, panel := range panelsFor(st) {
		p, err := timePanel(st, panel, minutes, markers)
		if err != nil {
			return err
		}
		plots = append(plots, []*plot.Plot{p})
	}
	if len(st.Summary) > 0 {
		p, err := overheadPanel(st.Summary)
		if err != nil {
			return err
		}
		plots = append(plots, []*plot.Plot{p})
	}
	if len(st.Curve) > 0 {
		for _, panel := range curvePanels {
			p, err := curvePanel(st, panel)
			if err != nil {
				return err
			}
			plots = append(plots, []*plot.Plot{p})
		}
	}
	height := panelHeight*vg.Length(len(plots)) + headerHeight
	var canvas interface {
		vg.CanvasSizer
		io.WriterTo
	}
	switch format {
	case "svg":
		canvas = vgsvg.New(plotWidth, height)
	case "png":
		canvas = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(plotWidth, height), vgimg.UseDPI(110))}
	default:
		return fmt.Errorf("plot format %q: want svg or png", format)
	}
	dc := draw.New(canvas)
	verdict := string(st.Verdict)
	if verdict == "" {
		verdict = "-"
	}
	header(draw.Crop(dc, vg.Millimeter*4, 0, height-headerHeight, 0),
		fmt.Sprintf("perfexperiment %s/%s: phase %s, verdict %s", exp.Namespace, exp.Name, st.Phase, verdict), markers)
	tiles := draw.Tiles{Rows: len(plots), Cols: 1, PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2,
		PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 4, PadY: vg.Millimeter * 4}
	for i, c := range plot.Align(plots, tiles, draw.Crop(dc, 0, 0, 0, -headerHeight)) {
		plots[i][0].Draw(c[0])
	}
	_, err := canvas.WriteTo(out)
	return err
}

// plotFormat is the format a plot file's extension asks for.
func plotFormat(path string) (string, error) {
	switch ext := strings.ToLower(filepath.Ext(path)); ext {
	case ".svg", ".png":
		return ext[1:], nil
	default:
		return "", fmt.Errorf("--plot %s: the file must end in .svg or .png", path)
	}
}

// timePanel is one metric over the run.
func timePanel(st perfv1.PerfExperimentStatus, panel plotPanel, minutes func(time.Time) float64, markers []marker) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = panel.title
	p.X.Label.Text = "time since the experiment's start (minutes)"
	p.Add(plotter.NewGrid())
	lo, hi := math.Inf(1), math.Inf(-1)
	var items []plot.Plotter
	for _, w := range st.Windows {
		if w.Start == nil {
			continue
		}
		start := minutes(w.Start.Time)
		switch {
		case panel.point != nil:
			if v, ok := panel.point(w); ok {
				mid := (start + windowEnd(w, minutes)) / 2
				s, err := plotter.NewScatter(plotter.XYs{{X: mid, Y: v}})
				if err != nil {
					return nil, err
				}
				s.GlyphStyle.Color, s.GlyphStyle.Radius, s.GlyphStyle.Shape = variantColor(w.Variant), vg.Points(3), draw.CircleGlyph{}
				items = append(items, s)
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		default:
			vals := panel.lines(w)
			if len(vals) == 0 {
				continue
			}
			step := float64(w.Series.StepSeconds) / 60
			xys := make(plotter.XYs, len(vals))
			for i, v := range vals {
				xys[i] = plotter.XY{X: start + float64(i+1)*step, Y: v}
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
			l, err := plotter.NewLine(xys)
			if err != nil {
				return nil, err
			}
			l.LineStyle.Color, l.LineStyle.Width = variantColor(w.Variant), vg.Points(1.2)
			items = append(items, l)
		}
	}
	if panel.limit > 0 {
		hi = math.Max(hi, panel.limit)
		lo = math.Min(lo, panel.limit)
	}
	if math.IsInf(lo, 0) {
		lo, hi = 0, 1
	}
	pad := (hi - lo) * 0.08
	if pad == 0 {
		pad = math.Max(math.Abs(hi)*0.1, 1)
	}
	p.Y.Min, p.Y.Max = math.Max(0, lo-pad), hi+2.5*pad
	if err := shadeWindows(p, st, minutes); err != nil {
		return nil, err
	}
	p.Add(items...)
	if panel.limit > 0 {
		end := 0.0
		for _, w := range st.Windows {
			if w.Start != nil {
				end = math.Max(end, windowEnd(w, minutes))
			}
		}
		l, err := plotter.NewLine(plotter.XYs{{X: 0, Y: panel.limit}, {X: end, Y: panel.limit}})
		if err != nil {
			return nil, err
		}
		l.LineStyle.Color, l.LineStyle.Dashes = colorLimit, []vg.Length{vg.Points(6), vg.Points(3)}
		lbl, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{{X: 0, Y: panel.limit}}, Labels: []string{panel.limitLabel}})
		if err != nil {
			return nil, err
		}
		lbl.Offset = vg.Point{X: vg.Points(4), Y: vg.Points(2)}
		p.Add(l, lbl)
	}
	for _, m := range markers {
		l, err := plotter.NewLine(plotter.XYs{{X: m.at, Y: p.Y.Min}, {X: m.at, Y: p.Y.Max}})
		if err != nil {
			return nil, err
		}
		l.LineStyle.Color, l.LineStyle.Dashes, l.LineStyle.Width = m.color, m.dash, vg.Points(1.2)
		p.Add(l)
	}
	return p, nil
}

// shadeWindows shades each window by its kind and labels the measured ones
// with their stage and QPS at the top of the panel.
func shadeWindows(p *plot.Plot, st perfv1.PerfExperimentStatus, minutes func(time.Time) float64) error {
	var at plotter.XYs
	var names []string
	for _, w := range st.Windows {
		if w.Start == nil {
			continue
		}
		x0, x1 := minutes(w.Start.Time), windowEnd(w, minutes)
		poly, err := plotter.NewPolygon(plotter.XYs{{X: x0, Y: p.Y.Min}, {X: x1, Y: p.Y.Min}, {X: x1, Y: p.Y.Max}, {X: x0, Y: p.Y.Max}})
		if err != nil {
			return err
		}
		poly.LineStyle.Width = 0
		switch w.Variant {
		case perfv1.VariantBaseline:
			poly.Color = shadeBaseline
		case perfv1.VariantTreatment:
			poly.Color = shadeTreatment
		case perfv1.VariantWarmup:
			poly.Color = shadeWarmup
		default:
			poly.Color = shadeSettle
		}
		p.Add(poly)
		if w.Variant == perfv1.VariantBaseline || w.Variant == perfv1.VariantTreatment || w.Variant == perfv1.VariantWarmup {
			at = append(at, plotter.XY{X: x0, Y: p.Y.Max})
			names = append(names, windowLabel(w))
		}
	}
	if len(at) == 0 {
		return nil
	}
	lbl, err := plotter.NewLabels(plotter.XYLabels{XYs: at, Labels: names})
	if err != nil {
		return err
	}
	for i := range lbl.TextStyle {
		lbl.TextStyle[i].Font.Size = vg.Points(7)
		lbl.TextStyle[i].YAlign = draw.YTop
	}
	lbl.Offset = vg.Point{X: vg.Points(2), Y: -vg.Points(2)}
	p.Add(lbl)
	return nil
}

// windowLabel names a window as the legend's reader needs it: its stage and
// its load (QPS, or c and the virtual users).
func windowLabel(w perfv1.WindowStatus) string {
	if w.Variant == perfv1.VariantWarmup {
		return fmt.Sprintf("warm-up %dqps", w.QPS)
	}
	if w.Round != nil { // a sub-window of an interleaved stage: round and arm
		arm := "A"
		if w.Variant == perfv1.VariantTreatment {
			arm = "B"
		}
		return fmt.Sprintf("s%d r%d %s", w.Stage+1, *w.Round+1, arm)
	}
	what := string(w.Variant)
	if w.Arm != "" && w.Variant == perfv1.VariantTreatment {
		what = w.Arm // a variant's treatment window: its name
	}
	if w.Concurrency > 0 {
		return fmt.Sprintf("s%d c%d %s", w.Stage+1, w.Concurrency, what)
	}
	return fmt.Sprintf("s%d %dqps %s", w.Stage+1, w.QPS, what)
}

// runMarkers are the moments the toggle went on and off, and the abort.
func runMarkers(st perfv1.PerfExperimentStatus, minutes func(time.Time) float64) []marker {
	var out []marker
	for i, w := range st.Windows {
		if w.Start == nil || i == 0 {
			continue
		}
		prev := st.Windows[i-1]
		if w.Round != nil {
			// Interleaved: the toggle switches where the arm changes, at the
			// start of the slot (the end of the previous sub-window), or at
			// the stage's start when its first sub-window is the treatment.
			at := w.Start.Time
			if prev.Round != nil && prev.End != nil {
				if prev.Variant == w.Variant {
					continue
				}
				at = prev.End.Time
			} else if w.Variant != perfv1.VariantTreatment {
				continue
			}
			if w.Variant == perfv1.VariantTreatment {
				out = append(out, marker{at: minutes(at), label: "toggle applied", color: colorToggle})
			} else {
				out = append(out, marker{at: minutes(at), label: "toggle reverted", color: colorRevert, dash: []vg.Length{vg.Points(4), vg.Points(3)}})
			}
			continue
		}
		// The toggle is applied when a baseline ends (the settle after it runs
		// with the toggle on) and reverted when a treatment ends.
		switch prev.Variant {
		case perfv1.VariantBaseline:
			out = append(out, marker{at: minutes(w.Start.Time), label: "toggle applied", color: colorToggle})
		case perfv1.VariantTreatment:
			out = append(out, marker{at: minutes(w.Start.Time), label: "toggle reverted", color: colorRevert, dash: []vg.Length{vg.Points(4), vg.Points(3)}})
		}
	}
	if a := st.Abort; a != nil {
		out = append(out, marker{at: minutes(a.At.Time), label: "aborted: " + a.Reason, color: colorAbort, dash: []vg.Length{vg.Points(2), vg.Points(2)}})
	}
	return out
}

// header writes the title and, under it, the legend of colours, shades and
// markers, above the panels so it hides no data.
func header(c draw.Canvas, title string, markers []marker) {
	l := plot.NewLegend()
	l.Top, l.Left = true, true
	l.TextStyle.Font.Size = vg.Points(8)
	add := func(name string, c color.Color, dash []vg.Length) {
		line := draw.LineStyle{Color: c, Dashes: dash, Width: vg.Points(2)}
		l.Add(name, legendLine{line})
	}
	add("baseline (toggle off)", colorBaseline, nil)
	add("treatment (toggle on)", colorTreatment, nil)
	seen := map[string]bool{}
	for _, m := range markers {
		if !seen[m.label] {
			seen[m.label] = true
			add(m.label, m.color, m.dash)
		}
	}
	add("shaded: settle (grey), warm-up (tan)", shadeSettle, nil)
	sty := l.TextStyle
	sty.Font.Size = vg.Points(12)
	sty.XAlign, sty.YAlign = draw.XCenter, draw.YTop
	c.FillText(sty, vg.Point{X: (c.Min.X + c.Max.X) / 2, Y: c.Max.Y}, title)
	l.Draw(draw.Crop(c, 0, 0, 0, -vg.Points(18)))
}

// legendLine is a legend entry drawn as a short line.
type legendLine struct{ draw.LineStyle }

func (l legendLine) Thumbnail(c *draw.Canvas) {
	y := (c.Min.Y + c.Max.Y) / 2
	c.StrokeLine2(l.LineStyle, c.Min.X, y, c.Max.X, y)
}

// overheadPanel is each stage's relative overhead for CPU, memory and p99
// with its 95 % interval, as the summary holds them.
func overheadPanel(summary []perfv1.StageSummary) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "overhead per stage (%, 95% interval)"
	p.Y.Label.Text = "overhead (%)"
	p.Add(plotter.NewGrid())
	var names []string
	for _, s := range summary {
		name := s.Stage
		if name == "" {
			name = fmt.Sprintf("%dqps", s.QPS)
		}
		names = append(names, name)
	}
	p.NominalX(names...)
	metrics := []struct {
		name string
		get  func(perfv1.StageSummary) *perfv1.MetricComparison
		c    color.Color
	}{
		{"CPU", func(s perfv1.StageSummary) *perfv1.MetricComparison { return s.CPU }, colorCPU},
		{"memory", func(s perfv1.StageSummary) *perfv1.MetricComparison { return s.Memory }, colorMemory},
		{"p99", func(s perfv1.StageSummary) *perfv1.MetricComparison { return s.P99 }, colorP99},
	}
	zero, err := plotter.NewLine(plotter.XYs{{X: -0.5, Y: 0}, {X: float64(len(summary)) - 0.5, Y: 0}})
	if err != nil {
		return nil, err
	}
	zero.LineStyle.Color = colorOther
	p.Add(zero)
	for k, m := range metrics {
		var pts plotter.XYs
		var errs plotter.YErrors
		for i, s := range summary {
			c := m.get(s)
			if c == nil {
				continue
			}
			y := c.Overhead * 100
			pts = append(pts, plotter.XY{X: float64(i) + (float64(k)-1)*0.15, Y: y})
			errs = append(errs, struct{ Low, High float64 }{Low: y - c.CILow*100, High: c.CIHigh*100 - y})
		}
		if len(pts) == 0 {
			continue
		}
		s, err := plotter.NewScatter(pts)
		if err != nil {
			return nil, err
		}
		s.GlyphStyle.Color, s.GlyphStyle.Radius, s.GlyphStyle.Shape = m.c, vg.Points(3), draw.CircleGlyph{}
		bars, err := plotter.NewYErrorBars(struct {
			plotter.XYs
			plotter.YErrors
		}{pts, errs})
		if err != nil {
			return nil, err
		}
		bars.LineStyle.Color = m.c
		p.Add(bars, s)
		p.Legend.Add(m.name, s)
	}
	// Room above the highest interval for the legend.
	p.Legend.Top, p.Legend.Left = true, true
	p.Y.Max = math.Max(p.Y.Max, 0) + (p.Y.Max-math.Min(p.Y.Min, 0))*0.35
	p.Y.Min = math.Min(p.Y.Min, 0)
	return p, nil
}

// curveMetric is one panel of the load curve: its title, its axis and the value
// of a point.
type curveMetric struct {
	title, y string
	get      func(perfv1.CurvePoint) float64
}

// curvePanels are the load curve's two panels: throughput and p99 against the
// load each stage asked for.
var curvePanels = []curveMetric{
	{"throughput per stage", "achieved (req/s)", func(p perfv1.CurvePoint) float64 { return p.AchievedQPS }},
	{"p99 latency per stage", "p99 (ms)", func(p perfv1.CurvePoint) float64 { return p.P99Ms }},
}

// curvePanel plots one curve metric against the stages' load: their rate, or
// their virtual users, or (stages of both kinds) their order. A qps sweep's
// throughput panel has the line achieved = asked; the knee is marked.
func curvePanel(st perfv1.PerfExperimentStatus, panel curveMetric) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = panel.title
	p.Y.Label.Text = panel.y
	p.Add(plotter.NewGrid())
	allQPS, allVUs := true, true
	for _, c := range st.Curve {
		allQPS = allQPS && c.QPS > 0
		allVUs = allVUs && c.Concurrency > 0
	}
	x := func(i int, c perfv1.CurvePoint) float64 { return float64(i) }
	switch {
	case allQPS:
		p.X.Label.Text = "asked rate (req/s)"
		x = func(_ int, c perfv1.CurvePoint) float64 { return float64(c.QPS) }
	case allVUs:
		p.X.Label.Text = "concurrency (virtual users)"
		x = func(_ int, c perfv1.CurvePoint) float64 { return float64(c.Concurrency) }
	default:
		names := make([]string, len(st.Curve))
		for i, c := range st.Curve {
			names[i] = c.Stage
		}
		p.NominalX(names...)
	}
	var pts plotter.XYs
	for i, c := range st.Curve {
		pts = append(pts, plotter.XY{X: x(i, c), Y: panel.get(c)})
	}
	line, points, err := plotter.NewLinePoints(pts)
	if err != nil {
		return nil, err
	}
	line.LineStyle.Color, points.GlyphStyle.Color, points.GlyphStyle.Shape = colorP99, colorP99, draw.CircleGlyph{}
	if strings.HasPrefix(panel.title, "throughput") {
		line.LineStyle.Color, points.GlyphStyle.Color = colorCPU, colorCPU
	}
	p.Add(line, points)
	p.Legend.Add(panel.y, line, points)
	if allQPS && strings.HasPrefix(panel.title, "throughput") {
		ideal, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 0}, {X: pts[len(pts)-1].X, Y: pts[len(pts)-1].X}})
		if err != nil {
			return nil, err
		}
		ideal.LineStyle.Color, ideal.LineStyle.Dashes = colorOther, []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(ideal)
		p.Legend.Add("achieved = asked", ideal)
	}
	if k := st.Knee; k != nil && int(k.Index) < len(pts) {
		kx := pts[k.Index].X
		mark, err := plotter.NewLine(plotter.XYs{{X: kx, Y: 0}, {X: kx, Y: math.Max(pts[k.Index].Y, 1) * 1.1}})
		if err != nil {
			return nil, err
		}
		mark.LineStyle.Color, mark.LineStyle.Dashes = colorAbort, []vg.Length{vg.Points(2), vg.Points(2)}
		p.Add(mark)
		p.Legend.Add(fmt.Sprintf("knee: stage %s (capacity %.0f req/s)", k.Stage, k.CapacityQPS), mark)
	}
	p.Legend.Top, p.Legend.Left = true, true
	p.Y.Min = 0
	return p, nil
}

func variantColor(v perfv1.Variant) color.Color {
	switch v {
	case perfv1.VariantBaseline:
		return colorBaseline
	case perfv1.VariantTreatment:
		return colorTreatment
	}
	return colorOther
}

// plotStart is the run's first moment: its start, or its first window's.
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

// windowEnd is when a window ended, in minutes since the start: its end, else
// the end of its series, else its start.
func windowEnd(w perfv1.WindowStatus, minutes func(time.Time) float64) float64 {
	start := minutes(w.Start.Time)
	if w.End != nil {
		return minutes(w.End.Time)
	}
	if w.Series != nil && w.Series.StepSeconds > 0 {
		return start + float64(w.Series.Points)*float64(w.Series.StepSeconds)/60
	}
	return start
}
