// Package slicewatch is the perf suite's clock: it watches the EndpointSlices
// of a namespace and records, for every Service, each change of its set of
// ready addresses at the moment the watch delivered it. A change to traffic is
// measured from that moment, for each path from its own Service's slice.
package slicewatch
