package analysisbench

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"perfexp.dev/perf-operator/internal/analysis"
)

// The bars (DESIGN.md §7) with a margin for Monte-Carlo error: with 1,000
// trials the standard error of a 95 % rate is 0.7 points, so 0.935 and 0.065
// are two standard errors from the bar.
const (
	trials      = 1000
	minCoverage = 0.935
	maxFlagged  = 0.065
	resamples   = 999 // the 95 % quantile is then exactly the 950th order statistic
)

type method struct {
	name string
	opts analysis.Options
}

var (
	studentized = method{"studentized (default)", analysis.Options{Resamples: resamples, Confidence: 0.95}}
	blockPct    = method{"block percentile", analysis.Options{Resamples: resamples, Confidence: 0.95, Interval: analysis.IntervalPercentile}}
	iidPct      = method{"i.i.d. percentile", analysis.Options{Resamples: resamples, Confidence: 0.95, Interval: analysis.IntervalPercentile, BlockLen: 1}}
	contrasts   = []method{studentized, blockPct, iidPct}
)

// scenario is one simulated setting: a model, a window length (both windows
// equal), the injected overhead (0 for A/A) and the methods to run on the same
// data. Only the default method is held to the bars.
type scenario struct {
	m       model
	n       int
	effect  float64
	methods []method
	// maxWidth, when set, bounds the default method's mean interval width.
	maxWidth float64
}

func (s scenario) label() string {
	kind := fmt.Sprintf("%+.0f%%", s.effect*100)
	if s.effect == 0 {
		kind = "A/A"
	}
	return fmt.Sprintf("%s φ=%.2f\t%gm (%d)\t%s", s.m.name, s.m.phi, float64(s.n)/4, s.n, kind)
}

// tally is one method's outcome over a scenario's trials.
type tally struct {
	covered, flagged, errors int
	width, block             float64
}

func (t tally) coverage() float64 { return float64(t.covered) / trials }
func (t tally) flagRate() float64 { return float64(t.flagged) / trials }

func scenarios() []scenario {
	var out []scenario
	for _, n := range []int{120, 20} { // 30-minute and 5-minute windows of 15 s samples
		for _, eff := range []float64{0.04, 0} {
			out = append(out,
				scenario{m: cpuModel(0.8), n: n, effect: eff, methods: contrasts},
				scenario{m: cpuModel(0.7), n: n, effect: eff, methods: contrasts[:1]},
				scenario{m: cpuModel(0.9), n: n, effect: eff, methods: contrasts[:1]},
				scenario{m: rate1mModel, n: n, effect: eff, methods: contrasts[:1]})
		}
		for _, eff := range []float64{0.02, 0} {
			out = append(out, scenario{m: memModel, n: n, effect: eff, methods: contrasts})
		}
	}
	// Short windows with a step anyone sees by eye must give a narrow
	// interval, never one wider than the data's spread.
	for _, n := range []int{12, 16, 20} {
		out = append(out, scenario{m: shortModel, n: n, effect: 0.17, methods: contrasts[:1], maxWidth: 0.08},
			scenario{m: shortModel, n: n, effect: 0, methods: contrasts[:1]})
	}
	return out
}

// run simulates the scenario's trials on all CPUs. Every trial has its own
// seeds and its own result slot, so the tallies do not depend on scheduling.
func run(id int, s scenario) []tally {
	type outcome struct{ res []analysis.Result }
	results := make([]outcome, trials)
	var wg sync.WaitGroup
	workers := runtime.GOMAXPROCS(0)
	for w := range workers {
		wg.Go(func() {
			for i := w; i < trials; i += workers {
				r := rand.New(rand.NewPCG(uint64(id+1)*0x9e3779b97f4a7c15, uint64(i)))
				b, t := s.m.series(r, s.n, 1), s.m.series(r, s.n, 1+s.effect)
				for _, m := range s.methods {
					o := m.opts
					o.Seed = uint64(i)
					res, err := analysis.Compare(b, t, o)
					if err != nil {
						res = analysis.Result{N: [2]int{-1, -1}}
					}
					results[i].res = append(results[i].res, res)
				}
			}
		})
	}
	wg.Wait()
	out := make([]tally, len(s.methods))
	for _, o := range results {
		for k, res := range o.res {
			tl := &out[k]
			if res.N[0] < 0 {
				tl.errors++
				continue
			}
			if res.CILow <= s.effect && s.effect <= res.CIHigh {
				tl.covered++
			}
			if res.Significant {
				tl.flagged++
			}
			tl.width += (res.CIHigh - res.CILow) / trials
			tl.block += float64(res.BlockLen) / trials
		}
	}
	return out
}

// TestIntervalBars prints the coverage table and asserts the bars for the
// default method in every scenario.
func TestIntervalBars(t *testing.T) {
	if testing.Short() {
		t.Skip("Monte-Carlo harness: about half a minute on 2 cores")
	}
	start := time.Now()
	var sb strings.Builder
	tw := tabwriter.NewWriter(&sb, 0, 0, 2, ' ', tabwriter.AlignRight|tabwriter.Debug)
	fmt.Fprintf(tw, "metric\twindow\teffect\tmethod\tcoverage\tsignificant\tCI width\tblock\t\n")
	type failure struct {
		s   scenario
		tal tally
	}
	var failures []failure
	for id, s := range scenarios() {
		tallies := run(id, s)
		for k, m := range s.methods {
			tl := tallies[k]
			lbl := s.label()
			if k > 0 {
				lbl = "\t\t"
			}
			fmt.Fprintf(tw, "%s\t%s\t%.3f\t%.3f\t%.3f\t%.1f\t\n", lbl, m.name, tl.coverage(), tl.flagRate(), tl.width, tl.block)
			if k == 0 && (tl.errors > 0 || tl.coverage() < minCoverage || (s.effect == 0 && tl.flagRate() > maxFlagged) || (s.maxWidth > 0 && tl.width > s.maxWidth)) {
				failures = append(failures, failure{s, tl})
			}
		}
	}
	tw.Flush()
	t.Logf("%d trials per scenario, %d resamples, 95 %% intervals; bars: coverage ≥ %.3f, A/A significant ≤ %.3f (%s)\n"+
		"significant: power on effect rows, false-positive rate on A/A rows; CI width: mean upper − lower bound of the overhead; block: mean block length\n%s",
		trials, resamples, minCoverage, maxFlagged, time.Since(start).Round(time.Second), sb.String())
	for _, f := range failures {
		t.Errorf("%s: coverage %.3f, significant %.3f, width %.3f (bound %g), %d errors", strings.ReplaceAll(f.s.label(), "\t", " "),
			f.tal.coverage(), f.tal.flagRate(), f.tal.width, f.s.maxWidth, f.tal.errors)
	}
}

// TestNaiveBootstrapUndercovers pins the contrast the table shows: on the
// design's main case the i.i.d. bootstrap's "95 %" interval is far too narrow.
func TestNaiveBootstrapUndercovers(t *testing.T) {
	if testing.Short() {
		t.Skip("Monte-Carlo harness")
	}
	tl := run(1000, scenario{m: cpuModel(0.8), n: 120, effect: 0.04, methods: []method{iidPct}})[0]
	if tl.coverage() > 0.8 {
		t.Errorf("i.i.d. bootstrap covers %.3f; the harness's noise is not autocorrelated enough to matter", tl.coverage())
	}
}

// BenchmarkCompare is the cost of one metric's comparison with the operator's
// options (1,999 resamples), for 30-, 5- and 60-minute windows.
func BenchmarkCompare(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	for _, n := range []int{120, 20, 240} {
		base, treat := cpuModel(0.8).series(r, n, 1), cpuModel(0.8).series(r, n, 1.04)
		pct := analysis.DefaultOptions()
		pct.Interval = analysis.IntervalPercentile
		for _, m := range []method{{"default", analysis.DefaultOptions()}, {"percentile", pct}} {
			b.Run(fmt.Sprintf("%s/n=%d", m.name, n), func(b *testing.B) {
				for b.Loop() {
					if _, err := analysis.Compare(base, treat, m.opts); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
