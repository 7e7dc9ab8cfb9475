// Package connload is the perf suite's data-plane load client (run in the
// client pods as `perf-client load`), against the echo server
// (fixtures/echo), which writes one hello line on every connection and then
// echoes:
//
//   - Open: connections started on a fixed schedule (start + i/rate), each in
//     its own goroutine whatever the previous ones do, and timed from its
//     scheduled start, not from when the dial began, to the first byte of the
//     server's hello. A client that falls behind (a stalled scheduler, a
//     busy CPU) adds its lag to the latencies instead of hiding it: no
//     coordinated omission.
//   - Closed: a fixed number of workers, each dialling, reading the hello
//     and closing, one connection after another: new connections per second
//     at that concurrency.
//   - Bulk: one or more streams, each writing as fast as the path takes for
//     a while and reading the echo back; throughput is bytes echoed over the
//     time from the first write to the last end of stream.
//
// A failed connection is counted under fixtures/echo's class of its error.
// Quantiles are nearest-rank over every sample (Quantile); Curve is the
// latency at a fixed ladder of quantiles, what the report draws.
package connload
