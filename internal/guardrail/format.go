package guardrail

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
)

// resourceDefault is the growth limit, or the API's default when unset.
func resourceDefault(q *resource.Quantity) resource.Quantity {
	if q != nil {
		return *q
	}
	return resource.MustParse(perfv1.DefaultMaxGrowthPerMinute)
}

// growthMessage explains a heap-growth breach, e.g.
// "pod web-1: heap +712 MiB/min, limit 100 MiB/min; projected to reach the
// memory limit (12 GiB) in 9m".
func growthMessage(pod, series string, v verdict, cfg Config, current, limitBytes float64) string {
	what := "heap"
	if series == seriesWorkingSet {
		what = "working set"
	}
	perMin := v.slope * 60
	var b strings.Builder
	fmt.Fprintf(&b, "pod %s: %s +%s/min, limit %s/min", pod, what, formatBytes(perMin), formatBytes(cfg.MaxGrowthPerMinute))
	switch v.kind {
	case evidenceJump:
		fmt.Fprintf(&b, " (%s after GC %s, %s above its usual %s: %s noise σ)", what, formatBytes(v.floorNow),
			formatBytes(v.floorNow-v.floorRef), formatBytes(v.floorRef), formatSigmas(v.sigmas))
	case evidenceRamp:
		fmt.Fprintf(&b, " (rising steadily: %s, %s above its usual %s: %s noise σ)", formatBytes(v.floorNow),
			formatBytes(v.floorNow-v.floorRef), formatBytes(v.floorRef), formatSigmas(v.sigmas))
	case evidenceRise:
		fmt.Fprintf(&b, " (%s after GC %s, %s above its usual %s and rising at every GC: %s noise σ)", what, formatBytes(v.floorNow),
			formatBytes(v.floorNow-v.floorRef), formatBytes(v.floorRef), formatSigmas(v.sigmas))
	case evidenceTrend:
		fmt.Fprintf(&b, " (%s after GC rising)", what)
	case evidenceSustain:
		fmt.Fprintf(&b, " (rising outside any one-minute cache fill: %s, %s standard errors above zero)", formatBytes(v.floorNow), formatSigmas(v.sigmas))
	}
	if limitBytes > 0 && !math.IsInf(limitBytes, 0) {
		if left := limitBytes - current; left > 0 {
			eta := time.Duration(left / perMin * float64(time.Minute))
			fmt.Fprintf(&b, "; projected to reach the memory limit (%s) in %s", formatBytes(limitBytes), formatDuration(eta))
		} else {
			fmt.Fprintf(&b, "; already at the memory limit (%s)", formatBytes(limitBytes))
		}
	}
	return b.String()
}

// formatBytes writes a byte count in binary units with three significant digits
// at most: 712 MiB, 11.1 GiB, 12 GiB.
func formatBytes(v float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for math.Abs(v) >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	digits := 0
	switch a := math.Abs(v); {
	case a < 9.995:
		digits = 2
	case a < 99.95:
		digits = 1
	}
	s := strconv.FormatFloat(v, 'f', digits, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s + " " + units[i]
}

// formatSigmas writes a number of standard deviations to two significant
// digits: 4.5, 14, 120.
func formatSigmas(s float64) string {
	if s < 9.95 {
		return strconv.FormatFloat(s, 'f', 1, 64)
	}
	return strconv.FormatFloat(s, 'f', 0, 64)
}

// formatPercent writes a fraction as a percentage with at most one decimal.
func formatPercent(f float64) string {
	s := strconv.FormatFloat(f*100, 'f', 1, 64)
	return strings.TrimSuffix(s, ".0") + "%"
}

// formatDuration writes a duration to the second below a minute and to the
// minute above: 45s, 9m, 1h5m.
func formatDuration(d time.Duration) string {
	if d < time.Minute {
		return fmt.Sprintf("%ds", int(math.Ceil(d.Seconds())))
	}
	d = d.Round(time.Minute)
	if d < time.Hour {
		return fmt.Sprintf("%dm", int(d.Minutes()))
	}
	h := int(d.Hours())
	if m := int(d.Minutes()) - 60*h; m > 0 {
		return fmt.Sprintf("%dh%dm", h, m)
	}
	return fmt.Sprintf("%dh", h)
}
