package scaleresult

import "strconv"

// Memory is a process's resident set as the kernel reports it, in bytes.
type Memory struct {
	RSS uint64 `json:"rss"` // VmRSS: resident now
	HWM uint64 `json:"hwm"` // VmHWM: peak resident ("high water mark")
}

// MiB formats bytes as MiB with one decimal.
func MiB(b uint64) string { return strconv.FormatFloat(float64(b)/(1<<20), 'f', 1, 64) }
