package designbench

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

// variantsRun simulates one stage of an experiment with k variants of no
// effect (A/A) under the design the operator does not use, one shared
// baseline: a baseline window, then per variant a settle, its treatment window
// and a settle after its revert. It returns, for corrected (1 − 0.05/k) and
// plain 95 % intervals, whether any of the k comparisons with the shared
// baseline looked significant, and the last variant's estimate (its distance
// in time from the baseline is the largest).
func variantsRun(w *world, k int, window, settle time.Duration, seed uint64) (anyCorrected, anyPlain bool, last float64, err error) {
	var base analysis.Series
	t := time.Duration(0)
	for ; t < window; t += step {
		base = append(base, w.sample(t, false, 0))
	}
	for v := range k {
		for end := t + settle; t < end; t += step {
			w.sample(t, false, 0)
		}
		var tr analysis.Series
		for end := t + window; t < end; t += step {
			tr = append(tr, w.sample(t, false, 0))
		}
		for end := t + settle; t < end; t += step {
			w.sample(t, false, 0)
		}
		for i, conf := range []float64{analysis.FamilyConfidence(k), 0.95} {
			o := analysis.DefaultOptions()
			o.Resamples, o.Seed, o.Confidence = resamples, seed*16+uint64(v), conf
			res, e := analysis.Compare(base, tr, o)
			if e != nil {
				return false, false, 0, e
			}
			if res.Significant {
				if i == 0 {
					anyCorrected = true
				} else {
					anyPlain = true
				}
			}
			if v == k-1 && i == 0 {
				last = res.Overhead
			}
		}
	}
	return anyCorrected, anyPlain, last, nil
}

// bracketedRun is the operator's design: the baseline is measured again after
// each variant, and each variant is compared with the baselines on both sides
// of it, pooled (their mean cancels a linear drift), at the corrected
// confidence.
func bracketedRun(w *world, k int, window, settle time.Duration, seed uint64) (anyCorrected bool, last float64, err error) {
	t := time.Duration(0)
	measure := func(on bool) analysis.Series {
		var s analysis.Series
		for end := t + window; t < end; t += step {
			s = append(s, w.sample(t, on, 0))
		}
		return s
	}
	idle := func() {
		for end := t + settle; t < end; t += step {
			w.sample(t, false, 0)
		}
	}
	bases := []analysis.Series{measure(false)}
	var trs []analysis.Series
	for range k {
		idle()
		trs = append(trs, measure(false))
		idle()
		bases = append(bases, measure(false))
	}
	for v := range k {
		pooled := append(append(analysis.Series{}, bases[v]...), bases[v+1]...)
		o := analysis.DefaultOptions()
		o.Resamples, o.Seed, o.Confidence = resamples, seed*16+uint64(v), analysis.FamilyConfidence(k)
		res, e := analysis.Compare(pooled, trs[v], o)
		if e != nil {
			return false, 0, e
		}
		anyCorrected = anyCorrected || res.Significant
		if v == k-1 {
			last = res.Overhead
		}
	}
	return anyCorrected, last, nil
}

// TestVariantsFamilyWiseError measures how often a run with k variants of no
// effect flags at least one of them (the family-wise error) under the
// operator's bracketed design, and under one shared baseline with corrected
// and plain intervals, per drift. The bracketed rate must hold 5 % (plus three
// Monte-Carlo standard errors) under every drift; the shared baseline's does
// not, even without drift: the slow noise (a 15-minute correlation time) moves
// the level between the baseline and a variant measured half an hour later
// more than either window's own noise says, and a drift biases the later
// variants. The default run checks three variants without drift; make
// bench-design runs every cell.
func TestVariantsFamilyWiseError(t *testing.T) {
	if testing.Short() {
		t.Skip("Monte-Carlo harness")
	}
	trials, ks, cellDrifts := 1000, []int{3}, drifts[:1]
	if full() {
		trials, ks, cellDrifts = 4000, []int{1, 2, 3, 5}, drifts
	}
	window, settle := 10*time.Minute, 2*time.Minute
	s := stages[0]
	var sb strings.Builder
	tw := tabwriter.NewWriter(&sb, 0, 0, 2, ' ', tabwriter.AlignRight|tabwriter.Debug)
	fmt.Fprintf(tw, "drift\tvariants\tshared baseline: flagged (corrected)\tflagged (plain 95 %%)\tlast variant's bias pp\terrors\tbracketed (the operator's): flagged\tlast variant's bias pp\t\n")
	start := time.Now()
	for di, dr := range cellDrifts {
		for _, k := range ks {
			corrected, plain, errs := make([]bool, trials), make([]bool, trials), make([]bool, trials)
			last := make([]float64, trials)
			brFlag, brErr, brLast := make([]bool, trials), make([]bool, trials), make([]float64, trials)
			total := window + time.Duration(k)*(2*settle+window)
			var wg sync.WaitGroup
			workers := runtime.GOMAXPROCS(0)
			for wk := range workers {
				wg.Go(func() {
					for i := wk; i < trials; i += workers {
						r := rand.New(rand.NewPCG(uint64(1000+100*di+k), uint64(i)))
						c, p, l, err := variantsRun(newWorld(s, r, dr, total), k, window, settle, uint64(i))
						corrected[i], plain[i], last[i], errs[i] = c, p, l, err != nil
						rb := rand.New(rand.NewPCG(uint64(1000+100*di+k), uint64(i)))
						bf, bl, berr := bracketedRun(newWorld(s, rb, dr, total+time.Duration(k)*window), k, window, settle, uint64(i))
						brFlag[i], brLast[i], brErr[i] = bf, bl, berr != nil
					}
				})
			}
			wg.Wait()
			nc, np, ne, bias := 0, 0, 0, 0.0
			for i := range trials {
				switch {
				case errs[i]:
					ne++
				default:
					if corrected[i] {
						nc++
					}
					if plain[i] {
						np++
					}
					bias += last[i] / float64(trials)
				}
			}
			fc, fp := float64(nc)/float64(trials), float64(np)/float64(trials)
			nb, nbe, bbias := 0, 0, 0.0
			for i := range trials {
				if brErr[i] {
					nbe++
					continue
				}
				if brFlag[i] {
					nb++
				}
				bbias += brLast[i] / float64(trials)
			}
			ne += nbe
			fmt.Fprintf(tw, "%s\t%d\t%.3f\t%.3f\t%+.2f\t%d\t%.3f\t%+.2f\t\n", dr.name, k, fc, fp, bias*100, ne, float64(nb)/float64(trials), bbias*100)
			fb := float64(nb) / float64(trials)
			if limit := 0.05 + 3*0.218/float64(isqrt(trials)); fb > limit || ne > 0 {
				t.Errorf("%d variants, drift %s: %.3f of A/A runs flagged a variant under the bracketed design (limit %.3f), %d errors", k, dr.name, fb, limit, ne)
			}
			if k > 1 && dr.name == "none" && fp <= fc {
				t.Errorf("%d variants: plain intervals flagged %.3f, no more than corrected %.3f", k, fp, fc)
			}
		}
	}
	tw.Flush()
	t.Logf("%d trials per cell, stage %s, windows %s, settle %s, samples every %s (%s)\n%s",
		trials, s.name, window, settle, step, time.Since(start).Round(time.Second), sb.String())
}

func isqrt(n int) int {
	r := 1
	for (r+1)*(r+1) <= n {
		r++
	}
	return r
}
