package analysis

import "fmt"

// LoadPoint is one stage of a sweep as its baseline window measured it.
type LoadPoint struct {
	// Name is the stage's name, for the reason.
	Name string
	// QPS is the rate the stage asked for; Concurrency its closed-loop
	// virtual users. Exactly one is set.
	QPS, Concurrency int32
	// Achieved is the rate of requests sent and answered; P99 the 99th
	// percentile latency in ms (0: unknown).
	Achieved, P99 float64
	// Measured is false when the stage has no load result (the run ended
	// before it, or its Job left none): it neither places nor moves the knee.
	Measured bool
}

// KneeRule is spec.knee: a stage is past capacity when its achieved rate is
// more than Shortfall (a fraction) below the rate it asked for, or its p99
// exceeds P99Factor times the first measured stage's (and every later stage's
// stays above that).
type KneeRule struct {
	Shortfall float64
	P99Factor float64
}

// Knee is where a sweep stopped keeping up.
type Knee struct {
	// Index is the first stage past capacity.
	Index int
	// CapacityQPS is the highest rate any measured stage achieved: past the
	// knee a sweep's rate levels off at the target's capacity (the latency
	// rule may place the knee below it).
	CapacityQPS float64
	// Reason names the rule and its numbers.
	Reason string
}

// FindKnee returns the first stage past capacity, or false when every
// measured stage kept up.
//
// A qps stage asks for its own rate. A closed loop asks for no rate, but below
// capacity its rate grows with its users (Little's law at a constant latency),
// so a concurrency stage asks for the rate the measured stage before it
// reached, scaled by the ratio of their concurrencies; the first concurrency
// stage, and one after a qps stage, ask for nothing. Past capacity a closed
// loop's rate stays flat and its latency grows with the users, which the p99
// rule sees too.
func FindKnee(points []LoadPoint, rule KneeRule) (Knee, bool) {
	var capacity float64
	for _, p := range points {
		if p.Measured {
			capacity = max(capacity, p.Achieved)
		}
	}
	var refP99 float64
	var prev *LoadPoint
	for i := range points {
		p := &points[i]
		if !p.Measured {
			continue
		}
		asked, from := askedRate(p, prev)
		switch {
		case asked > 0 && p.Achieved < (1-rule.Shortfall)*asked:
			return Knee{Index: i, CapacityQPS: capacity, Reason: fmt.Sprintf(
				"stage %s achieved %.1f req/s of the %.1f %s (%.0f %% short; spec.knee.rateShortfall %.0f %%)",
				p.Name, p.Achieved, asked, from, (1-p.Achieved/asked)*100, rule.Shortfall*100)}, true
		case refP99 > 0 && p99StaysAbove(points[i:], rule.P99Factor*refP99):
			return Knee{Index: i, CapacityQPS: capacity, Reason: fmt.Sprintf(
				"stage %s's p99 %.1f ms is %.1f× the first stage's %.1f ms (spec.knee.p99Factor %g)",
				p.Name, p.P99, p.P99/refP99, refP99, rule.P99Factor)}, true
		}
		if refP99 == 0 {
			refP99 = p.P99
		}
		prev = p
	}
	return Knee{}, false
}

// p99StaysAbove reports whether the p99 of every measured stage from the first
// of points on exceeds limit. Past capacity latency only grows with the load, so
// a single stage's p99 above the limit that a later stage's does not confirm
// is the noise of a tail estimate, not the knee.
func p99StaysAbove(points []LoadPoint, limit float64) bool {
	for _, p := range points {
		if p.Measured && p.P99 > 0 && p.P99 <= limit {
			return false
		}
	}
	return true
}

// askedRate is the rate stage p asked for and how the reason says so.
func askedRate(p, prev *LoadPoint) (float64, string) {
	switch {
	case p.QPS > 0:
		return float64(p.QPS), "asked"
	case prev != nil && prev.Concurrency > 0 && prev.Achieved > 0:
		return prev.Achieved * float64(p.Concurrency) / float64(prev.Concurrency), fmt.Sprintf(
			"that %d users reach at stage %s's rate per user", p.Concurrency, prev.Name)
	}
	return 0, ""
}
