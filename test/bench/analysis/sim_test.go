package analysisbench

import (
	"math"
	"math/rand/v2"

	"perfexp.dev/perf-operator/internal/analysis"
)

// model simulates one metric of a service under constant load, sampled every
// 15 s: mean·(1 + AR(1) + white noise + GC bumps), optionally smoothed by a
// moving average the way rate(…[1m]) smooths cAdvisor counters.
type model struct {
	name  string
	unit  string
	mean  float64
	cv    float64 // marginal coefficient of variation of the AR(1) part
	phi   float64 // AR(1) coefficient at one 15 s step
	white float64 // coefficient of variation of independent scrape noise
	// GC-like bumps: with probability bumpP per sample a bump of exponential
	// height (mean bumpSize, relative) starts and decays by bumpDecay a step.
	bumpP, bumpSize, bumpDecay float64
	ma                         int // moving-average length; 0 or 1 is none
}

// The models. CPU's AR(1) coefficients span the brief's 0.7–0.9; memory moves
// more slowly (φ = 0.95: a correlation time of ~10 min) with little noise.
var (
	cpuModel = func(phi float64) model {
		return model{name: "cpu", unit: "cores", mean: 0.8, cv: 0.05, phi: phi, white: 0.01,
			bumpP: 0.03, bumpSize: 0.08, bumpDecay: 0.4}
	}
	memModel = model{name: "memory", unit: "bytes", mean: 2.1e9, cv: 0.015, phi: 0.95, white: 0.002}
	// rate1m is not AR(1): a weaker AR(0.5) with bumps, smoothed over four
	// samples like rate(container_cpu_usage_seconds_total[1m]) scraped every
	// 15 s. It checks that the AR(1) prewhitening is not what makes the
	// coverage.
	// short is the quick start's regime (issue 13): CPU with 1 % scrape noise
	// and a little slow wander, windows of 12–20 points.
	shortModel  = model{name: "cpu 1% noise", unit: "cores", mean: 0.255, cv: 0.005, phi: 0.5, white: 0.01}
	rate1mModel = model{name: "cpu-rate1m", unit: "cores", mean: 0.8, cv: 0.05, phi: 0.5, white: 0.02,
		bumpP: 0.03, bumpSize: 0.08, bumpDecay: 0.4, ma: 4}
)

// series draws n samples with every value scaled by scale, so the true relative
// overhead of a scale-s series over a scale-1 one is exactly s − 1.
func (m model) series(r *rand.Rand, n int, scale float64) analysis.Series {
	sd := m.cv * math.Sqrt(1-m.phi*m.phi)
	a := m.cv * r.NormFloat64() // stationary start
	bump := 0.0
	warm := m.ma + 20 // lets the bump process and the smoothing settle
	raw := make([]float64, n+warm)
	for i := range raw {
		a = m.phi*a + sd*r.NormFloat64()
		bump *= m.bumpDecay
		if r.Float64() < m.bumpP {
			bump += m.bumpSize * r.ExpFloat64()
		}
		raw[i] = m.mean * scale * (1 + a + bump + m.white*r.NormFloat64())
	}
	out := make(analysis.Series, n)
	k := max(m.ma, 1)
	for i := range out {
		s := 0.0
		for _, v := range raw[warm+i-k+1 : warm+i+1] {
			s += v
		}
		out[i] = s / float64(k)
	}
	return out
}
