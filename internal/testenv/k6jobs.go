package testenv

import (
	"fmt"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"perfexp.dev/perf-operator/internal/k6"
)

// Tests that play the Job controller and the kubelet for the operator's k6
// Jobs (test/crash, test/bench/scale) read a Job's window, write its pod's
// result and complete it with these.

// K6Window is the rate and length of a k6 Job's window, from the env the
// operator gave its pods; zero when they are missing.
func K6Window(job *batchv1.Job) (qps int32, dur time.Duration) {
	for _, e := range job.Spec.Template.Spec.Containers[0].Env {
		switch e.Name {
		case k6.EnvQPS:
			n, _ := strconv.Atoi(e.Value)
			qps = int32(n)
		case k6.EnvDuration:
			dur, _ = time.ParseDuration(e.Value)
		}
	}
	return qps, dur
}

// K6Result is what run.js leaves in a one-pod window's termination message
// when the target kept up: every arrival served, none failed, none dropped.
func K6Result(name string, qps int32, dur time.Duration, start time.Time) string {
	n := int64(float64(qps) * dur.Seconds())
	return fmt.Sprintf(`{"v":1,"window":%q,"index":0,"pods":1,"qps":%d,"rate":%d,"startMs":%d,"durationMs":%d,`+
		`"requests":%d,"iterations":%d,"failures":0,"dropped":0,"p50":2.1,"p95":4.8,"p99":9.5,"max":31.2}`,
		name, qps, qps, start.UnixMilli(), dur.Milliseconds(), n, n)
}

// CompleteJob sets the status the Job controller writes for a Job whose one
// pod succeeded.
func CompleteJob(job *batchv1.Job, started, end metav1.Time) {
	job.Status.StartTime, job.Status.CompletionTime, job.Status.Succeeded = &started, &end, 1
	job.Status.Conditions = []batchv1.JobCondition{
		{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: end},
		{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: end},
	}
}
