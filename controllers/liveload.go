package controllers

import (
	"context"
	"net"
	"sort"
	"strconv"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"perfexp.dev/perf-operator/internal/engine"
	"perfexp.dev/perf-operator/internal/k6"
)

// liveReading is a k6 pod's last reading, kept to turn the next one into an
// interval's counts.
type liveReading struct {
	at     time.Time
	counts k6.Live
}

// readLive reads the live counters of every running k6 pod of the experiment,
// all at once and bounded by k6.LiveTimeout, so a sample never holds the
// reconcile for long. A pod that does not answer is left out of this sample.
// The pods are the reconcile's (observeJobs: the operator's cache, where k6
// pods carry the experiment's label); the reads are HTTP requests to pod IPs,
// as for an http toggle.
func (r *PerfExperimentReconciler) readLive(ctx context.Context, pods []*corev1.Pod, p *pending) []engine.LiveLoad {
	var running []*corev1.Pod
	for _, pod := range pods {
		if k6Running(pod) {
			running = append(running, pod)
		}
	}
	if len(running) == 0 {
		p.live = nil
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, k6.LiveTimeout)
	defer cancel()
	got := make([]*liveReading, len(running))
	read := func(i int, pod *corev1.Pod) {
		// The time of the read itself, not of the reconcile: the metrics
		// query before it may have taken seconds, and the achieved rate is
		// counts over the time between two reads.
		at := r.Clock.Now()
		l, err := r.LoadAPI.Read(ctx, net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(k6.APIPort)))
		if err != nil {
			log.FromContext(ctx).V(1).Info("live k6 counters unavailable", "pod", pod.Name, "error", err.Error())
			return
		}
		got[i] = &liveReading{at: at, counts: l}
	}
	if len(running) == 1 {
		read(0, running[0]) // most windows run one k6 pod: no goroutine for it
	} else {
		var wg sync.WaitGroup
		for i, pod := range running {
			wg.Add(1)
			go func() {
				defer wg.Done()
				read(i, pod)
			}()
		}
		wg.Wait()
	}
	seen := map[string]liveReading{}
	var out []engine.LiveLoad
	for i, pod := range running {
		if got[i] == nil {
			if prev, ok := p.live[pod.Name]; ok {
				seen[pod.Name] = prev
			}
			continue
		}
		l := engine.LiveLoad{Job: pod.Labels[batchv1.JobNameLabel], Pod: pod.Name, At: got[i].at, Counts: got[i].counts}
		if prev, ok := p.live[pod.Name]; ok {
			l.PrevAt, l.Prev = prev.at, prev.counts
		}
		seen[pod.Name] = *got[i]
		out = append(out, l)
	}
	p.live = seen
	sort.Slice(out, func(i, k int) bool { return out[i].Pod < out[k].Pod })
	return out
}

// k6Running reports whether a pod's k6 container runs and can be reached.
func k6Running(pod *corev1.Pod) bool {
	if !pod.DeletionTimestamp.IsZero() || pod.Status.Phase != corev1.PodRunning || pod.Status.PodIP == "" {
		return false
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == k6.ContainerName {
			return cs.State.Running != nil
		}
	}
	return false
}
