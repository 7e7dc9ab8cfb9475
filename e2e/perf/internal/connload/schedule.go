package connload

import "time"

// Interval is the spacing of an open loop's starts at rate per second.
func Interval(rate float64) time.Duration {
	return time.Duration(float64(time.Second) / rate)
}

// Scheduled is when connection i of an open loop starting at start is due:
// from the start, not from the previous one, so that a late start does not
// shift every later one.
func Scheduled(start time.Time, interval time.Duration, i int) time.Time {
	return start.Add(time.Duration(i) * interval)
}
