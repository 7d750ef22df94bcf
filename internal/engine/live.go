package engine

import (
	"fmt"
	"sort"
	"strings"
	"time"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
	"perfexp.dev/perf-operator/internal/k6"
)

// LiveLoad is one running k6 pod's live counters, read from its REST API when
// a sample was taken. The counters are k6's since the pod's test began; the
// previous reading of the same pod (PrevAt zero when there is none, say after
// an operator restart) turns them into the last interval's counts.
type LiveLoad struct {
	// Job and Pod name the load Job and its pod.
	Job, Pod string
	// At is when Counts were read (the reconciler's clock).
	At     time.Time
	Counts k6.Live
	// PrevAt and Prev are the pod's previous reading.
	PrevAt time.Time
	Prev   k6.Live
}

const (
	// MinLiveRequests is the fewest requests a live error rate is judged on: at
	// the start of a window one failed request of three is no error rate.
	MinLiveRequests = 20
	// LiveShortfall is the share of the window's rate below which the live
	// achieved rate over one sampling interval flags the window. It is looser
	// than the ±1 % the final result must meet: one interval's count is read on
	// the operator's clock, not k6's.
	LiveShortfall = 0.9
)

// liveCounts are one Job's counters, summed over the pods read.
type liveCounts struct {
	total, interval k6.Live
	// pods is how many pods were read; withInterval how many had a previous
	// reading with load flowing; rate is the sum of their achieved rates.
	pods, withInterval int
	rate               float64
	from, to           time.Time
	// at is when the counters were read; buckets sums the pods' latency
	// histograms, over bucketPods pods that had one.
	at         time.Time
	buckets    map[int]int64
	bucketPods int
}

// judgeLive checks the live counters of the running load Jobs on every sample:
// from the first toggle on, an error rate above spec.guardrails.errorRate
// aborts the run at once (settle load included: a toggle is watched under
// load; but not the settle of a toggle that rolls the pods, whose rollout
// fails requests by itself); in a measured window, an achieved rate short of the window's, or
// dropped iterations, flag the window at once. The window's numbers still come
// from its Job's final result. It returns false when it ended the run.
func (x *decider) judgeLive() bool {
	byJob := x.liveByJob()
	names := make([]string, 0, len(byJob))
	for n := range byJob {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		rec := x.windowOfJob(name)
		if rec == nil || rec.End != nil {
			continue // a finished window is judged on its final result
		}
		c := byJob[name]
		// The settle of a toggle that rolls the pods carries the rollout itself:
		// requests to pods being replaced fail whatever the toggle does, which is
		// what the settle period keeps out of the run. Its errors are not judged
		// live; the treatment window after it is.
		rolling := rec.Variant == perfv1.VariantSettle && x.spec.Switch().RollsPods()
		if x.toggleEverApplied() && !rolling {
			if msg, bad := x.liveErrorRate(rec, c); bad {
				x.finish(perfv1.PhaseAborted, perfv1.ReasonErrorRate, msg)
				return false
			}
		}
		if rec.Variant == perfv1.VariantBaseline || rec.Variant == perfv1.VariantTreatment {
			x.liveShortfall(rec, c)
		}
		if rec.Round != nil {
			x.liveSnapshot(rec, c)
		}
	}
	return true
}

func (c *liveCounts) add(l LiveLoad) {
	c.pods++
	c.at = later(c.at, l.At)
	if l.Counts.Buckets != nil {
		c.bucketPods++
		if c.buckets == nil {
			c.buckets = map[int]int64{}
		}
		for i, v := range l.Counts.Buckets {
			c.buckets[i] += v
		}
	}
	c.total.Requests += l.Counts.Requests
	c.total.Failed += l.Counts.Failed
	c.total.Dropped += l.Counts.Dropped
	// An interval needs a previous reading of the same k6 run (counters only
	// grow) taken while its load already flowed (not during k6's start-up).
	if l.PrevAt.IsZero() || !l.At.After(l.PrevAt) || l.Prev.Requests <= 0 ||
		l.Counts.Requests < l.Prev.Requests || l.Counts.Failed < l.Prev.Failed || l.Counts.Dropped < l.Prev.Dropped {
		return
	}
	c.withInterval++
	c.interval.Requests += l.Counts.Requests - l.Prev.Requests
	c.interval.Failed += l.Counts.Failed - l.Prev.Failed
	c.interval.Dropped += l.Counts.Dropped - l.Prev.Dropped
	c.rate += float64(l.Counts.Requests-l.Prev.Requests) / l.At.Sub(l.PrevAt).Seconds()
	if c.from.IsZero() || l.PrevAt.Before(c.from) {
		c.from = l.PrevAt
	}
	c.to = later(c.to, l.At)
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// liveErrorRate judges the last interval's failures when it has enough
// requests, else all of the run's so far.
func (x *decider) liveErrorRate(rec *perfv1.WindowStatus, c *liveCounts) (string, bool) {
	limit, err := x.spec.Guardrails.ErrorRate.Fraction()
	if err != nil {
		return "", false
	}
	counts, span := c.interval, fmt.Sprintf("between %s and %s", clock(c.from), clock(c.to))
	if counts.Requests < MinLiveRequests {
		counts, span = c.total, "so far"
	}
	if counts.Requests < MinLiveRequests {
		return "", false
	}
	rate := float64(counts.Failed) / float64(counts.Requests)
	if rate <= limit {
		return "", false
	}
	return fmt.Sprintf("error rate %.2f%% (%d of %d requests %s, live from load Job %s) in the %s window of stage %s, limit %s",
		rate*100, counts.Failed, counts.Requests, span, rec.Job, rec.Variant, stageName(x.spec, rec.Stage), x.spec.Guardrails.ErrorRate), true
}

// liveShortfall flags a measured window whose load fell short over the last
// interval: every pod of its Job read, each with an interval inside the window.
func (x *decider) liveShortfall(rec *perfv1.WindowStatus, c *liveCounts) {
	w := x.plan.measured(x.spec, rec.Stage, rec.Variant)
	pods := int(w.Pods(x.spec.Load.K6.Parallelism))
	if rec.Start == nil || c.pods < pods || c.withInterval < c.pods || c.from.Before(rec.Start.Time) || c.to.After(rec.Start.Add(w.Duration)) {
		return
	}
	var why string
	switch {
	case c.interval.Dropped > 0:
		why = fmt.Sprintf("k6 dropped %d iterations between %s and %s (live)", c.interval.Dropped, clock(c.from), clock(c.to))
	case w.QPS > 0 && c.rate < LiveShortfall*float64(w.QPS): // a closed loop asks for no rate
		why = fmt.Sprintf("k6 achieved %.1f of %d req/s between %s and %s (live)", c.rate, w.QPS, clock(c.from), clock(c.to))
	default:
		return
	}
	for _, s := range rec.Invalid {
		if strings.HasSuffix(s, "(live)") {
			return // flagged once; the final result gives the window's numbers
		}
	}
	rec.Invalid = append(rec.Invalid, why)
	x.event(true, perfv1.ReasonWindowInvalid, "%s window of stage %s is not trustworthy: %s", rec.Variant, stageName(x.spec, rec.Stage), why)
}

// windowOfJob is the window whose load Job is name: the open one (an
// interleaved stage's Job carries its sub-windows and, between them, its
// rounds record), else the last.
func (x *decider) windowOfJob(name string) *perfv1.WindowStatus {
	var last *perfv1.WindowStatus
	for i := len(x.st.Windows) - 1; i >= 0; i-- {
		w := &x.st.Windows[i]
		if w.Job != name {
			continue
		}
		if w.End == nil {
			return w
		}
		if last == nil {
			last = w
		}
	}
	return last
}

func clock(t time.Time) string { return t.UTC().Format("15:04:05") }

// liveAtClose takes the sub-window's last reading from this decision's own
// live counters when it has them: they were read at or after the sub-window's
// end but before this decision switches the toggle for the next slot, so the
// requests they add were served in the sub-window's arm.
func (x *decider) liveAtClose(rec *perfv1.WindowStatus) {
	if c := x.liveByJob()[rec.Job]; c != nil && rec.LiveStart != nil {
		x.liveSnapshot(rec, c)
	}
}

// liveByJob sums this decision's live readings by load Job.
func (x *decider) liveByJob() map[string]*liveCounts {
	byJob := map[string]*liveCounts{}
	for _, l := range x.obs.Live {
		c := byJob[l.Job]
		if c == nil {
			c = &liveCounts{}
			byJob[l.Job] = c
		}
		c.add(l)
	}
	return byJob
}

// liveSnapshot keeps an interleaved sub-window's first and last complete
// reading (every load pod read, each with its histogram): their difference is
// the sub-window's load and latency (closeSubWindow).
func (x *decider) liveSnapshot(rec *perfv1.WindowStatus, c *liveCounts) {
	pods := int(k6.Window{QPS: rec.QPS, VUs: rec.Concurrency}.Pods(x.spec.Load.K6.Parallelism))
	if rec.Start == nil || c.at.Before(rec.Start.Time) || c.pods < pods || c.bucketPods < c.pods {
		return
	}
	lc := &perfv1.LiveCounters{At: metav1Time(c.at), Requests: c.total.Requests, Failed: c.total.Failed, Buckets: k6.EncodeBuckets(c.buckets)}
	if rec.LiveStart == nil {
		rec.LiveStart = lc
		return
	}
	if c.at.After(rec.LiveStart.At.Time) {
		rec.LiveEnd = lc
	}
}

// liveLoad turns a closed sub-window's two readings into its load result, or
// leaves Load nil when it has none (a user script without run.js's
// histogram, the k6 API unreachable): then its round has no latency.
func liveLoad(rec *perfv1.WindowStatus) *perfv1.LoadResult {
	a, b := rec.LiveStart, rec.LiveEnd
	if a == nil || b == nil || !b.At.After(a.At.Time) || b.Requests < a.Requests || b.Failed < a.Failed {
		return nil
	}
	from, err1 := k6.DecodeBuckets(a.Buckets)
	to, err2 := k6.DecodeBuckets(b.Buckets)
	if err1 != nil || err2 != nil {
		return nil
	}
	h, err := k6.LiveHistogram(from, to)
	if err != nil || h.Total() == 0 {
		return nil
	}
	req := b.Requests - a.Requests
	return &perfv1.LoadResult{
		Requests: req, Failures: b.Failed - a.Failed,
		AchievedQPS: float64(req) / b.At.Sub(a.At.Time).Seconds(),
		P50Ms:       h.Quantile(0.50), P95Ms: h.Quantile(0.95), P99Ms: h.Quantile(0.99),
	}
}
