package k6

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// k6's REST API in a load pod. Command makes k6 listen on the pod's IP so the
// operator can read each running pod's live counters on every sample: the
// error rate and the achieved rate are judged while a window runs, not only
// when its Job ends. The per-window result in the termination message stays
// the source of the window's numbers.
const (
	// APIPort is the port of k6's REST API (k6's default, on every interface).
	APIPort = 6565
	// APIPortName names the k6 container's port for it.
	APIPortName = "k6-api"
	// LiveTimeout bounds one read of a pod's counters: a sample must never hold
	// the reconcile for long.
	LiveTimeout = 2 * time.Second
	// maxLiveBody bounds what is read of an answer (k6's is a few kB).
	maxLiveBody = 1 << 20
)

// Live are one k6 pod's counters since its test started.
type Live struct {
	// Requests is http_reqs' count.
	Requests int64
	// Failed is how many of them http_req_failed counted as failed.
	Failed int64
	// Dropped is dropped_iterations' count (0 when k6 has not dropped any:
	// it reports the metric only once it has).
	Dropped int64
	// Buckets are run.js's latency histogram so far, by Width-1 bucket index
	// (the submetrics perf_latency_g<g>{b:<i>}); nil when the script records
	// none (a user script). Two readings' difference is the histogram of the
	// requests between them.
	Buckets map[int]int64
}

// histogramGroup is run.js's GROUP: bucket i is counted by Counter
// perf_latency_g<i/GROUP> with tag b=<i%GROUP>.
const histogramGroup = 32

var bucketMetricID = regexp.MustCompile(`^perf_latency_g([0-9]+)\{b:([0-9]+)\}$`)

// LiveHistogram is the histogram of the requests counted between two readings'
// buckets (summed over the same pods).
func LiveHistogram(from, to map[int]int64) (Histogram, error) {
	h := NewHistogram()
	idx := make([]int, 0, len(to))
	for i := range to {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	for _, i := range idx {
		d := to[i] - from[i]
		switch {
		case d < 0:
			return Histogram{}, fmt.Errorf("latency bucket %d went back from %d to %d (another k6 run?)", i, from[i], to[i])
		case d > 0:
			h.Buckets = append(h.Buckets, Bucket{Index: i, Count: d})
		}
	}
	for i, c := range from {
		if _, ok := to[i]; !ok && c > 0 {
			return Histogram{}, fmt.Errorf("latency bucket %d vanished", i)
		}
	}
	return h, nil
}

// EncodeBuckets writes cumulative bucket counts compactly for the status:
// "index:count" pairs in index order, space-separated.
func EncodeBuckets(b map[int]int64) string {
	idx := make([]int, 0, len(b))
	for i, c := range b {
		if c > 0 {
			idx = append(idx, i)
		}
	}
	sort.Ints(idx)
	var sb strings.Builder
	for k, i := range idx {
		if k > 0 {
			sb.WriteByte(' ')
		}
		sb.WriteString(strconv.Itoa(i))
		sb.WriteByte(':')
		sb.WriteString(strconv.FormatInt(b[i], 10))
	}
	return sb.String()
}

// DecodeBuckets reads EncodeBuckets' form.
func DecodeBuckets(s string) (map[int]int64, error) {
	out := map[int]int64{}
	for _, f := range strings.Fields(s) {
		i, c, ok := strings.Cut(f, ":")
		idx, err1 := strconv.Atoi(i)
		n, err2 := strconv.ParseInt(c, 10, 64)
		if !ok || err1 != nil || err2 != nil || idx < 0 || n < 0 {
			return nil, fmt.Errorf("bucket %q is not index:count", f)
		}
		out[idx] = n
	}
	return out, nil
}

// LiveClient reads k6's live counters from /v1/metrics.
type LiveClient struct {
	// Client makes the request; nil means one that reaches pod IPs directly (no
	// proxy), keeps no idle connections and gives up after LiveTimeout. Tests
	// inject one whose transport dials an httptest server.
	Client *http.Client
}

var directLiveClient = &http.Client{
	Transport: &http.Transport{
		Proxy:             nil,
		DisableKeepAlives: true,
		DialContext:       (&net.Dialer{Timeout: LiveTimeout}).DialContext,
	},
	Timeout:       LiveTimeout,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// Read returns the counters of the k6 REST API at hostPort ("10.0.0.7:6565").
// It makes one request, bounded by LiveTimeout (and ctx), and never retries.
func (c LiveClient) Read(ctx context.Context, hostPort string) (Live, error) {
	client := c.Client
	if client == nil {
		client = directLiveClient
	}
	ctx, cancel := context.WithTimeout(ctx, LiveTimeout)
	defer cancel()
	url := "http://" + hostPort + "/v1/metrics"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return Live{}, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return Live{}, fmt.Errorf("k6 API at %s: no answer within %s", hostPort, LiveTimeout)
		}
		return Live{}, fmt.Errorf("k6 API at %s: %w", hostPort, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxLiveBody))
	if err != nil {
		return Live{}, fmt.Errorf("k6 API at %s: reading the answer: %w", hostPort, err)
	}
	if resp.StatusCode != http.StatusOK {
		return Live{}, fmt.Errorf("k6 API at %s: HTTP %s", hostPort, resp.Status)
	}
	l, err := ParseLive(body)
	if err != nil {
		return Live{}, fmt.Errorf("k6 API at %s: %w", hostPort, err)
	}
	return l, nil
}

// ParseLive reads the counters from a /v1/metrics answer (JSON:API: a list of
// {"id": name, "attributes": {"sample": {...}}}). http_reqs is required: without
// it nothing can be judged. http_req_failed is a rate; k6 reports its passes
// (the failed requests) in some versions and only the rate in others, so the
// failures are rate × requests when passes are absent.
func ParseLive(body []byte) (Live, error) {
	var doc struct {
		Data []struct {
			ID         string `json:"id"`
			Attributes struct {
				Sample json.RawMessage `json:"sample"`
			} `json:"attributes"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return Live{}, fmt.Errorf("not a /v1/metrics answer: %w", err)
	}
	var l Live
	var failedRate, failedPasses float64 = math.NaN(), math.NaN()
	seenReqs := false
	for _, m := range doc.Data {
		if g := bucketMetricID.FindStringSubmatch(m.ID); g != nil {
			var s map[string]float64
			if err := json.Unmarshal(m.Attributes.Sample, &s); err != nil {
				return Live{}, fmt.Errorf("%s: sample %s: %w", m.ID, m.Attributes.Sample, err)
			}
			grp, _ := strconv.Atoi(g[1])
			b, _ := strconv.Atoi(g[2])
			v, err := count(s, "count")
			if err != nil || b >= histogramGroup {
				return Live{}, fmt.Errorf("%s: not a latency bucket: %v", m.ID, s)
			}
			if l.Buckets == nil {
				l.Buckets = map[int]int64{}
			}
			l.Buckets[grp*histogramGroup+b] = v
			continue
		}
		if m.ID != "http_reqs" && m.ID != "dropped_iterations" && m.ID != "http_req_failed" {
			continue // other metrics may carry samples of other shapes
		}
		var s map[string]float64
		if err := json.Unmarshal(m.Attributes.Sample, &s); err != nil {
			return Live{}, fmt.Errorf("%s: sample %s: %w", m.ID, m.Attributes.Sample, err)
		}
		switch m.ID {
		case "http_reqs":
			v, err := count(s, "count")
			if err != nil {
				return Live{}, fmt.Errorf("http_reqs: %w", err)
			}
			l.Requests, seenReqs = v, true
		case "dropped_iterations":
			v, err := count(s, "count")
			if err != nil {
				return Live{}, fmt.Errorf("dropped_iterations: %w", err)
			}
			l.Dropped = v
		case "http_req_failed":
			if v, ok := number(s, "passes"); ok {
				failedPasses = v
			}
			if v, ok := number(s, "rate"); ok {
				failedRate = v
			}
		}
	}
	if !seenReqs {
		return Live{}, errors.New("no http_reqs metric yet")
	}
	switch {
	case !math.IsNaN(failedPasses) && failedPasses >= 0:
		l.Failed = int64(failedPasses)
	case !math.IsNaN(failedRate) && failedRate >= 0 && failedRate <= 1:
		l.Failed = int64(math.Round(failedRate * float64(l.Requests)))
	case !math.IsNaN(failedRate):
		return Live{}, fmt.Errorf("http_req_failed: rate %g is not between 0 and 1", failedRate)
	}
	l.Failed = min(l.Failed, l.Requests)
	return l, nil
}

func number(s map[string]float64, key string) (float64, bool) {
	v, ok := s[key]
	return v, ok
}

func count(s map[string]float64, key string) (int64, error) {
	v, ok := number(s, key)
	if !ok || v < 0 {
		return 0, fmt.Errorf("no usable %q in %v", key, s)
	}
	return int64(math.Round(v)), nil
}
