// Package measure holds what the legs share beyond a single leg.
//
// Dialling: FromEveryClient dials a target from every meshed client into a
// run's counts; Refusal is the run of the refusal legs (every client dials
// the target at once; green is the node proxy's refusal of every attempt —
// accepted, then closed: never ECONNREFUSED from the host).
//
// Evidence around each run, for the targets a leg declares (Dialled):
// WaitProgrammed waits until every node's proxy serves what its agent emits
// (the signal a Phase flip or an EndpointSlice change took effect); a Probe
// reads every node's proxy stats and agent refusals before and after the
// run, waits until they account for the run's attempts, and turns them into
// the run's checks (buildChecks), reads the agent's refusal log
// (ReadRefusals) and kube-proxy's hold on the cut Services before and after
// (the run's Cuts).
package measure
