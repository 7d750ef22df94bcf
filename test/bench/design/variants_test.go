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
// effect (A/A): a baseline window, then per variant a settle, its treatment
// window and a settle after its revert, as the engine runs them. It returns,
// for the corrected (1 − 0.05/k, what the operator uses) and the plain 95 %
// intervals, whether any of the k comparisons with the shared baseline looked
// significant, and the last variant's estimate (its distance in time from
// the baseline is the largest).
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
		for i, conf := range []float64{1 - 0.05/float64(k), 0.95} {
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

// TestVariantsFamilyWiseError measures how often a run with k variants of no
// effect flags at least one of them (the family-wise error), with the
// Bonferroni-corrected intervals the operator reports and with plain 95 %
// ones, per drift. The corrected rate must stay below the plain one. It is
// not the nominal 5 % even without drift: the stage's slow noise (a 15-minute
// correlation time) moves the level between the shared baseline and a variant
// measured half an hour later more than either window's own noise says, the
// same reason the sequential design undercovers in TestTimeToAnswer; a single
// variant, next to its baseline, is at 4.7 %. The bound here is the measured
// rate (7.9 % for three variants at 4,000 trials) plus three Monte-Carlo
// standard errors, a regression check, not the nominal level. Under drift the
// table shows what a shared baseline costs the later variants: their bias
// grows with their distance from it.
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
	fmt.Fprintf(tw, "drift\tvariants\tflagged (corrected)\tflagged (plain 95 %%)\tlast variant's bias pp\terrors\t\n")
	start := time.Now()
	for di, dr := range cellDrifts {
		for _, k := range ks {
			corrected, plain, errs := make([]bool, trials), make([]bool, trials), make([]bool, trials)
			last := make([]float64, trials)
			total := window + time.Duration(k)*(2*settle+window)
			var wg sync.WaitGroup
			workers := runtime.GOMAXPROCS(0)
			for wk := range workers {
				wg.Go(func() {
					for i := wk; i < trials; i += workers {
						r := rand.New(rand.NewPCG(uint64(1000+100*di+k), uint64(i)))
						c, p, l, err := variantsRun(newWorld(s, r, dr, total), k, window, settle, uint64(i))
						corrected[i], plain[i], last[i], errs[i] = c, p, l, err != nil
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
			fmt.Fprintf(tw, "%s\t%d\t%.3f\t%.3f\t%+.2f\t%d\t\n", dr.name, k, fc, fp, bias*100, ne)
			if dr.name != "none" {
				continue
			}
			// The full run's measured rate (4,000 trials: 4.7, 7.1, 7.9 and
			// 9.3 % for 1, 2, 3 and 5 variants) plus three Monte-Carlo standard
			// errors at these trials.
			measured := map[int]float64{1: 0.047, 2: 0.071, 3: 0.079, 5: 0.093}[k]
			if limit := measured + 3*0.28/float64(isqrt(trials)); fc > limit || ne > 0 {
				t.Errorf("%d variants, no drift: %.3f of A/A runs flagged a variant with corrected intervals (limit %.3f), %d errors", k, fc, limit, ne)
			}
			if k > 1 && fp <= fc {
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
