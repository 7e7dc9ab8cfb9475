// Package traffic reads what the perf suite's clients report (one
// echo.Timed JSON line per attempt, perf-client dial-every) and says when
// traffic moved: the first reply from an endpoint that became ready, the last
// one from an endpoint that went away. Attempts arrive in the order they end;
// every question here is asked of their start times, the clients' clock,
// which on kind is the machine's (every node container shares its kernel).
package traffic
