package scale

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"
)

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's utime and stime: 100
// on every Linux architecture Go supports.
const clockTicks = 100

// procStat reads /proc/<pid>/stat: the command name and the fields after it.
// The name, in parentheses, may hold spaces: fields count from after its
// closing parenthesis (f[0] is field 3, state; f[1] the parent's pid).
func procStat(pid int) (comm string, f []string, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", nil, err
	}
	s := string(b)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return "", nil, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	return s[open+1 : end], strings.Fields(s[end+1:]), nil
}

// procCPU returns a process's user+system CPU time.
func procCPU(pid int) (time.Duration, error) {
	_, f, err := procStat(pid)
	if err != nil {
		return 0, err
	}
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / clockTicks, nil
}

// childPID returns the pid of this process's child named comm (as
// /proc/<pid>/stat has it), or 0: envtest starts the kube-apiserver as one.
func childPID(comm string) int {
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		name, f, err := procStat(pid)
		if err != nil || name != comm || len(f) < 2 {
			continue
		}
		if ppid, _ := strconv.Atoi(f[1]); ppid == os.Getpid() {
			return pid
		}
	}
	return 0
}

// procRSS returns a process's resident set size in bytes, and of it the pages
// of files (the binary's text and read-only data, the largest share) and the
// anonymous ones (the Go heap, stacks and runtime).
func procRSS(pid int) (rss, file, anon int64, err error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, 0, err
	}
	defer f.Close()
	fields := map[string]*int64{"VmRSS:": &rss, "RssFile:": &file, "RssAnon:": &anon}
	seen := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		for k, v := range fields {
			if rest, ok := strings.CutPrefix(sc.Text(), k); ok {
				kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
				if err != nil {
					return 0, 0, 0, err
				}
				*v = kb << 10
				seen++
			}
		}
	}
	if seen != len(fields) {
		return 0, 0, 0, fmt.Errorf("no VmRSS, RssFile or RssAnon in /proc/%d/status", pid)
	}
	return rss, file, anon, nil
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// promText is one scrape of a Prometheus text endpoint, line by line.
type promText []string

// sum adds every sample of name whose label set contains all of labels
// (each given as `key="value"`).
func (p promText) sum(name string, labels ...string) float64 {
	var total float64
	for _, line := range p {
		if !strings.HasPrefix(line, name) || len(line) <= len(name) || (line[len(name)] != '{' && line[len(name)] != ' ') {
			continue
		}
		ok := true
		for _, l := range labels {
			if !strings.Contains(line, l) {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err == nil {
			total += v
		}
	}
	return total
}

func parseText(r io.Reader) (promText, error) {
	var out promText
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if line := sc.Text(); line != "" && line[0] != '#' {
			out = append(out, line)
		}
	}
	return out, sc.Err()
}

func scrapeURL(url string) (promText, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return parseText(resp.Body)
}

func scrapeAPIServer(ctx context.Context, rc rest.Interface) (promText, error) {
	rc2, err := rc.Get().AbsPath("/metrics").Stream(ctx)
	if err != nil {
		return nil, err
	}
	defer rc2.Close()
	return parseText(rc2)
}

// counting counts the requests the test itself sends to the apiserver, in all
// and by the apiserver's verb and resource, so they can be taken out of the
// apiserver's own totals.
type counting struct {
	n    *atomic.Int64
	by   *byKind
	next http.RoundTripper
}

func (c counting) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	c.by.add(requestKind(r))
	return c.next.RoundTrip(r)
}

// byKind counts requests by "VERB resource[/subresource]".
type byKind struct {
	mu sync.Mutex
	m  map[string]float64
}

func (b *byKind) add(k string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m == nil {
		b.m = map[string]float64{}
	}
	b.m[k]++
}

func (b *byKind) snapshot() map[string]float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return maps.Clone(b.m)
}

// requestKind names a request the way apiserver_request_total labels it.
func requestKind(r *http.Request) string {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	// /api/v1/... or /apis/group/version/...
	switch {
	case len(parts) > 0 && parts[0] == "api":
		parts = parts[min(2, len(parts)):]
	case len(parts) > 0 && parts[0] == "apis":
		parts = parts[min(3, len(parts)):]
	default:
		return r.Method + " " + r.URL.Path
	}
	if len(parts) >= 2 && parts[0] == "namespaces" && len(parts) > 2 {
		parts = parts[2:]
	}
	res, name, sub := "", "", ""
	if len(parts) > 0 {
		res = parts[0]
	}
	if len(parts) > 1 {
		name = parts[1]
	}
	if len(parts) > 2 {
		sub = parts[2]
	}
	verb := r.Method
	switch {
	case r.Method == http.MethodGet && r.URL.Query().Get("watch") == "true":
		verb = "WATCH"
	case r.Method == http.MethodGet && name == "":
		verb = "LIST"
	case r.Method == http.MethodPost:
		verb = "POST"
	}
	if sub != "" {
		res += "/" + sub
	}
	return verb + " " + res
}

// apiserverKinds sums apiserver_request_total by "VERB resource[/subresource]".
func apiserverKinds(p promText) map[string]float64 {
	out := map[string]float64{}
	for _, line := range p {
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		verb, res, sub := label(line, "verb"), label(line, "resource"), label(line, "subresource")
		if sub != "" {
			res += "/" + sub
		}
		i := strings.LastIndexByte(line, ' ')
		v, _ := strconv.ParseFloat(line[i+1:], 64)
		out[verb+" "+res] += v
	}
	return out
}

func label(line, name string) string {
	i := strings.Index(line, name+`="`)
	if i < 0 {
		return ""
	}
	rest := line[i+len(name)+2:]
	return rest[:strings.IndexByte(rest, '"')]
}

// snapshot is every counter the table is computed from, at one instant.
type snapshot struct {
	at         time.Time
	dur        time.Duration // of a difference
	cpu        time.Duration
	apiCPU     time.Duration // the kube-apiserver's
	reconciles float64
	clientReqs float64 // the manager's own rest_client_requests_total
	apiTotal   float64 // apiserver_request_total, every client
	apiFlow    float64 // dispatched for the operator's flow schema
	own        int64   // requests the test sent
	queries    int64   // at the fake Prometheus
	probes     int64   // of which source checks
	shared     int64   // of which shared fetches (more than one pod)
	adminReqs  int64
	// allocated and gcs are the manager's Go allocations (bytes) and
	// garbage collections: the CPU follows them, and unlike the CPU they do
	// not depend on what else runs on the machine.
	allocated, gcs float64
	// kinds are the apiserver's requests by verb and resource, the test's
	// own taken out.
	kinds map[string]float64
}

func (s snapshot) minus(b snapshot) snapshot {
	out := snapshot{at: s.at, dur: s.at.Sub(b.at), cpu: s.cpu - b.cpu, apiCPU: s.apiCPU - b.apiCPU, reconciles: s.reconciles - b.reconciles, clientReqs: s.clientReqs - b.clientReqs,
		apiTotal: s.apiTotal - b.apiTotal, apiFlow: s.apiFlow - b.apiFlow, own: s.own - b.own, queries: s.queries - b.queries, probes: s.probes - b.probes, shared: s.shared - b.shared, adminReqs: s.adminReqs - b.adminReqs,
		allocated: s.allocated - b.allocated, gcs: s.gcs - b.gcs, kinds: map[string]float64{}}
	for k, v := range s.kinds {
		if d := v - b.kinds[k]; d > 0.5 {
			out.kinds[k] = d
		}
	}
	return out
}
