// Package translatetest holds the fixtures both sides of the agent–proxy
// contract test with: the Kubernetes objects the agent translates (a Service,
// its EndpointSlices, endpoint conditions and topology, the node) and the
// representative one-node resource set that internal/translate's golden file
// records and the node proxy's tests parse. Only tests import it.
package translatetest
