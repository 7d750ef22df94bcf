// Package analysis turns a stage's baseline and treatment windows into the
// overhead table: per metric the relative overhead (t̄ − b̄)/b̄ with a 95 %
// confidence interval that respects the time correlation of 15-second samples,
// whether it is significant (the interval excludes 0) and material (it exceeds
// the user's tolerance), and the stage's and the experiment's verdicts.
//
// Everything here is pure and deterministic: the same input and Options.Seed
// give the same output, on any machine.
//
// # Why not a plain (block) bootstrap percentile interval
//
// Resource samples of a service under constant load are strongly autocorrelated
// (AR(1) coefficients of 0.7–0.9 at 15 s for CPU, higher for memory), so a
// 30-minute window of 120 samples holds only a dozen or so independent pieces of
// information. An i.i.d. bootstrap ignores that and its "95 %" interval covers
// the truth about half the time. A circular block bootstrap with a Politis–White
// block length does better but its percentile interval still covers only 85 %
// of the time on 30-minute CPU windows (AR φ = 0.8), 62 % on memory (φ = 0.95)
// and under 60 % on 5-minute windows: its variance is a Bartlett-weighted sum
// of sample autocovariances truncated at the block length, biased low by roughly
// Σ|k|γ(k) / (ℓ·Σγ(k)) — 30 % at φ = 0.8 and ℓ ≈ 15 — and the sample
// autocovariances themselves are biased low once the window mean is removed.
// BCa corrects bias and skew of the bootstrap distribution but not its scale, so
// it inherits the same shortfall. test/bench/analysis measures all of this.
//
// # What Compare does instead
//
//  1. Work on the log ratio log(t̄/b̄): it is additive in the two independent
//     windows, closer to normal than the ratio, and maps back to an interval
//     that can never go below −100 %.
//  2. Studentize with the Kiefer–Vogelsang–Bunzel (KVB) variance of each mean:
//     the Bartlett long-run variance with bandwidth equal to the window length,
//     σ̂² = 2 n⁻² Σ S_t² over the partial sums S_t of the demeaned window. It
//     needs no bandwidth choice and, being "fixed-b", its randomness and bias are
//     part of the statistic's distribution instead of being ignored.
//  3. Calibrate that statistic with a bootstrap-t computed "naively" — the same
//     formula applied to each resampled series — which Gonçalves & Vogelsang
//     (Econometric Theory 27, 2011) show reproduces the fixed-b distribution and
//     is more accurate than its asymptotic critical values.
//  4. Resample each window separately with a circular block bootstrap of its
//     AR(1)-prewhitened residuals, then rebuild the series through the AR(1)
//     filter ("post-blackening", Davison & Hinkley 1997 §8.2). Plain blocks of
//     the window cannot carry correlation longer than a block, and at 20–120
//     samples blocks must be short; the filter carries it for them, and the
//     blocks (Politis–White length on the residuals) carry whatever the AR(1)
//     does not describe.
//  5. Use a conservative AR coefficient: the lag-1 autocorrelation with
//     Kendall's small-sample bias correction (+(1+3φ̂)/n) raised to its one-sided
//     95 % upper confidence bound, clamped to [0, 0.98]. The statistic's
//     critical value grows with φ, and φ̂ from a short window is biased low and
//     noisy, so the least favourable plausible φ is used (in the spirit of
//     Berger & Boos, JASA 1994). At 120 samples and φ ≤ 0.8 this widens the
//     interval by 5–10 % over steps 1–4 alone (which then cover 96 %); at
//     φ ≥ 0.9 or 20 samples, where steps 1–4 alone cover only 50–94 %, it is
//     what keeps coverage at 95 % — the interval becomes honestly wide (±30 %
//     for 5 minutes of CPU at φ = 0.8) instead of confidently wrong. Beyond φ = 0.98
//     (correlation time ≈ 25 min) no window under an hour can separate a level
//     from a mean, and no method can.
//  6. The interval is symmetric on the log scale: est ± c·se with c the
//     Confidence quantile of |T*| (symmetric bootstrap-t intervals have smaller
//     two-sided coverage error than equal-tailed ones).
//
// The price is power, and it is the data's, not the method's: with 30-minute
// windows of CPU at φ = 0.8 and 5 % noise a +4 % overhead is significant in about
// a third of runs, and 5-minute windows cannot show a few percent at all (their
// intervals span ±30 %). Longer windows, not a narrower formula, buy precision.
//
// Options.Interval = IntervalPercentile selects the textbook circular block
// bootstrap percentile interval of the ratio of means instead (BlockLen 1 makes
// it the i.i.d. bootstrap); it exists for comparison and is not recommended.
//
// # Decisions
//
// Material is decided on the point estimate: a metric is material when its
// overhead is strictly above the tolerance. A gate on the upper bound would fail
// every short or noisy window whatever the toggle does, a gate on the lower
// bound would pass overheads that are most likely too high; the point estimate
// errs equally either way at the tolerance, and the interval stays in the status
// for anyone who wants a stricter reading. Latency percentiles arrive as one
// exact value per window, so they carry no interval (CompareLatency) and are
// never significant, but the p99 can still be material.
package analysis
