// Package measure holds the measurements several legs share: dialling a
// target from every meshed client into a run's counts (FromEveryClient), and
// the refusal run of the three refusal legs (Refusal: every client dials the
// target at once, and green is the node proxy's refusal of every attempt —
// accepted, then closed: never ECONNREFUSED from the host — with the agent's
// svclb_svc_refused_total{reason, namespace, service} rising by exactly the
// number of attempts and no other reason counted for that Service).
package measure
