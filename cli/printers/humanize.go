package printers

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Age is how long ago t was, as a table shows it ("-" for an unknown time).
func Age(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return HumanDuration(now.Sub(t))
}

// HumanDuration is kubectl's short duration: precise while it is short,
// coarser as it grows ("45s", "5m30s", "3h", "2d4h", "400d").
func HumanDuration(d time.Duration) string {
	if seconds := int(d.Seconds()); seconds < -1 {
		return "<invalid>"
	} else if seconds < 0 {
		return "0s"
	} else if seconds < 60*2 {
		return fmt.Sprintf("%ds", seconds)
	}
	minutes := int(d / time.Minute)
	if minutes < 10 {
		if s := int(d/time.Second) % 60; s != 0 {
			return fmt.Sprintf("%dm%ds", minutes, s)
		}
		return fmt.Sprintf("%dm", minutes)
	} else if minutes < 60*3 {
		return fmt.Sprintf("%dm", minutes)
	}
	hours := int(d / time.Hour)
	if hours < 8 {
		if m := int(d/time.Minute) % 60; m != 0 {
			return fmt.Sprintf("%dh%dm", hours, m)
		}
		return fmt.Sprintf("%dh", hours)
	} else if hours < 48 {
		return fmt.Sprintf("%dh", hours)
	} else if hours < 24*8 {
		if h := hours % 24; h != 0 {
			return fmt.Sprintf("%dd%dh", hours/24, h)
		}
		return fmt.Sprintf("%dd", hours/24)
	} else if hours < 24*365*2 {
		return fmt.Sprintf("%dd", hours/24)
	} else if hours < 24*365*8 {
		if dy := (hours / 24) % 365; dy != 0 {
			return fmt.Sprintf("%dy%dd", hours/24/365, dy)
		}
		return fmt.Sprintf("%dy", hours/24/365)
	}
	return fmt.Sprintf("%dy", hours/24/365)
}

// MiB prints a size in MiB the way people read it: "256Mi", "16Gi".
func MiB(n int64) string {
	switch {
	case n == 0:
		return "0"
	case n%(1<<20) == 0:
		return fmt.Sprintf("%dTi", n>>20)
	case n%(1<<10) == 0:
		return fmt.Sprintf("%dGi", n>>10)
	case n >= 1<<10:
		return strconv.FormatFloat(float64(n)/(1<<10), 'f', 1, 64) + "Gi"
	}
	return fmt.Sprintf("%dMi", n)
}

// CPU prints thousandths of a vCPU as vCPUs: "8", "0.5".
func CPU(milli int64) string {
	return strconv.FormatFloat(float64(milli)/1000, 'f', -1, 64)
}

// VCPUs prints a flavor's vCPUs.
func VCPUs(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// Labels prints labels as k=v pairs, sorted; "<none>" without any.
func Labels(m map[string]string) string {
	if len(m) == 0 {
		return "<none>"
	}
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+"="+m[k])
	}
	return strings.Join(parts, ",")
}

// Percent is part of whole as a whole percentage, "-" for no whole.
func Percent(part, whole int64) string {
	if whole <= 0 {
		return "-"
	}
	return fmt.Sprintf("%d%%", part*100/whole)
}
