package guardrail

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"perfexp.dev/perf-operator/internal/guardrail/heapsim"
	"perfexp.dev/perf-operator/internal/metrics"
)

func roundTrip(st State) State {
	raw, err := json.Marshal(&st)
	if err != nil {
		panic(err)
	}
	var out State
	if err := json.Unmarshal(raw, &out); err != nil {
		panic(err)
	}
	return out
}

// fleet plays pods through a rollout and a leak, returning every decision; with
// restartEvery > 0 the state goes through JSON every that many calls, as an
// operator restart (or the engine's persisted status) does.
func fleet(restartEvery int) []string {
	cfg := defaultConfig()
	cfg.MaxRestarts = 10
	gens := map[string]*heapsim.Pod{}
	for i := 0; i < 3; i++ {
		gens[fmt.Sprintf("old-%d", i)] = newGen(uint64(i))
	}
	var st State
	var trace []string
	for k := 0; k < 240; k++ {
		t := float64(k) * 15
		if k == 120 { // rollout: the new pods replace the old ones and leak
			for i := 0; i < 3; i++ {
				delete(gens, fmt.Sprintf("old-%d", i))
				g := newGen(uint64(10 + i))
				g.Started, g.Warm, g.LeakRate, g.LeakOnset = t, 150, 700*mb/60, t
				gens[fmt.Sprintf("new-%d", i)] = g
			}
		}
		var smp []metrics.Sample
		var pods []PodState
		for _, name := range sortedKeys(gens) {
			g := gens[name]
			smp = append(smp, sample(g, name, t, false))
			started := epoch.Add(-3600e9)
			if g.Started > 0 {
				started = at(g.Started)
			}
			pods = append(pods, PodState{Name: name, StartedAt: started})
		}
		var b *Breach
		if k < 40 {
			st.Record(cfg, smp, pods, at(t))
		} else {
			b = st.Observe(cfg, smp, pods, limit, at(t))
		}
		trace = append(trace, fmt.Sprintf("%d %v", k, b))
		if restartEvery > 0 && k%restartEvery == 0 {
			st = roundTrip(st)
		}
	}
	return trace
}

func sortedKeys(m map[string]*heapsim.Pod) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	for i := range keys {
		for j := i + 1; j < len(keys); j++ {
			if keys[j] < keys[i] {
				keys[i], keys[j] = keys[j], keys[i]
			}
		}
	}
	return keys
}

// TestRestartSafety: a state that goes through JSON mid-stream (at any step)
// takes exactly the decisions of one that never does.
func TestRestartSafety(t *testing.T) {
	want := fleet(0)
	aborted := false
	for _, l := range want {
		aborted = aborted || l[len(l)-5:] != "<nil>"
	}
	if !aborted {
		t.Fatal("the reference run never aborted: the test would prove nothing")
	}
	for _, every := range []int{1, 2, 7, 33} {
		if got := fleet(every); !reflect.DeepEqual(got, want) {
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("round trip every %d calls: step %s, want %s", every, got[i], want[i])
				}
			}
		}
	}
}

// TestReplayIsIdempotent: samples passed twice (the engine may retry a batch)
// change nothing the second time.
func TestReplayIsIdempotent(t *testing.T) {
	cfg := defaultConfig()
	g := newGen(4)
	var st State
	for k := 0; k < 100; k++ {
		smp := []metrics.Sample{sample(g, "a", float64(k)*15, false)}
		st.Observe(cfg, smp, nil, limit, smp[0].Time)
		before := roundTrip(st)
		st.Observe(cfg, smp, nil, limit, smp[0].Time)
		if after := roundTrip(st); !reflect.DeepEqual(before, after) {
			t.Fatalf("sample %d: replaying it changed the state", k)
		}
	}
}

// TestStateIsBounded: 10,000 samples of 10 pods persist in under 16 KiB at the
// default 15 s interval (64 points a pod) and 24 KiB at 10 s (96); pods beyond
// 20 are dropped, least recently seen first, their restarts kept.
func TestStateIsBounded(t *testing.T) {
	for _, c := range []struct {
		every float64
		bound int
	}{{15, 16 << 10}, {10, 24 << 10}} {
		stateIsBounded(t, c.every, c.bound)
	}
}

func stateIsBounded(t *testing.T, every float64, bound int) {
	cfg := defaultConfig()
	cfg.Interval = time.Duration(every * float64(time.Second))
	_, capacity := historySpacing(cfg.Interval)
	cfg.MaxRestarts = 1 << 30
	gens := make([]*heapsim.Pod, 10)
	for i := range gens {
		gens[i] = newGen(uint64(i))
	}
	var st State
	for k := 0; k < 10000; k++ {
		var smp []metrics.Sample
		for i, g := range gens {
			smp = append(smp, sample(g, fmt.Sprintf("mall-gateway-7d9c8b6f5-%05d", i), float64(k)*every, false))
		}
		st.Observe(cfg, smp, nil, limit, smp[0].Time)
	}
	raw, _ := json.Marshal(&st)
	t.Logf("every %.0f s: 10 pods, 10,000 samples each: %d bytes of JSON", every, len(raw))
	if len(raw) > bound {
		t.Errorf("every %.0f s: state is %d bytes, want < %d", every, len(raw), bound)
	}
	for _, p := range st.Pods {
		if len(p.V) != capacity || len(p.DT) != len(p.V)-1 {
			t.Errorf("pod %s keeps %d points (%d intervals)", p.Name, len(p.V), len(p.DT))
		}
	}
	for i := 0; i < 50; i++ { // a stream of new pods, each restarted once
		now := at(150000 + float64(i)*every)
		st.Observe(cfg, nil, []PodState{{Name: fmt.Sprintf("burst-%02d", i), Restarts: 1}}, limit, now)
	}
	if len(st.Pods) != maxPods {
		t.Errorf("%d pods kept, want %d", len(st.Pods), maxPods)
	}
	if st.GoneRestarts != 30 {
		t.Errorf("GoneRestarts = %d, want the 30 dropped pods' restarts", st.GoneRestarts)
	}
}

// TestResetKeepsRestarts: Reset forgets the growth histories only.
func TestResetKeepsRestarts(t *testing.T) {
	cfg := defaultConfig()
	cfg.MaxRestarts = 1
	g := newGen(1)
	var st State
	for k := 0; k < 10; k++ {
		smp := []metrics.Sample{sample(g, "a", float64(k)*15, false)}
		st.Observe(cfg, smp, []PodState{{Name: "a", Restarts: 3 + int32(k/5)}}, limit, smp[0].Time)
	}
	st.Reset()
	p := st.Pods[0]
	if len(p.V) != 0 || p.Series != "" || p.Breaches != 0 {
		t.Errorf("history kept after Reset: %+v", p)
	}
	if p.counted() != 1 {
		t.Errorf("counted restarts %d after Reset, want 1", p.counted())
	}
	b := st.Observe(cfg, nil, []PodState{{Name: "a", Restarts: 5}}, limit, at(200))
	if b == nil || b.Reason != "Restarts" {
		t.Errorf("restarts after Reset not counted from the first Observe: %+v", b)
	}
}

// TestRestartSafetyEveryEvidence: for each piece of evidence (the floor's
// jump, the ramp of a working set, the floor trend), a state that goes through
// JSON after every sample aborts at the same sample with the same message.
func TestRestartSafetyEveryEvidence(t *testing.T) {
	cases := []struct {
		name  string
		setup func(sc *scenario)
		want  string // in the message: which evidence tripped
	}{
		{"jump", func(sc *scenario) {}, "above its usual"},
		{"ramp", func(sc *scenario) {
			sc.gen = heapsim.NewGo(rand.New(rand.NewPCG(sc.seed, 1)))
			sc.heapless = true
		}, "rising steadily"},
		{"trend", func(sc *scenario) { sc.gen.LeakAtGC = true }, "after GC rising"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			play := func(trip bool) (*Breach, float64) {
				sc := newScenario(3, toggle, toggle+1800)
				c.setup(sc)
				sc.gen.LeakRate, sc.gen.LeakOnset = 700*mb/60, toggle
				sc.roundTrip = trip
				return sc.play()
			}
			want, wantAt := play(false)
			if want == nil || !strings.Contains(want.Message, c.want) {
				t.Fatalf("reference run: %+v, want a breach saying %q", want, c.want)
			}
			got, gotAt := play(true)
			if got == nil || got.Message != want.Message || gotAt != wantAt {
				t.Fatalf("with a JSON round trip after every sample: %+v at %.0f s, want %+v at %.0f s", got, gotAt, want, wantAt)
			}
		})
	}
}
