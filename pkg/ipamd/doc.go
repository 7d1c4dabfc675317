// Package ipamd is the node agent's daemon: it owns the datastore's lifecycle
// (restore at start, flush at stop), serves the CNI plugin's gRPC API on its
// unix socket, and exposes introspection and Prometheus metrics. It holds
// the agent's own jobs (options, construction, start-up, run and stop,
// introspection, node init, host network wiring, the metrics endpoint) and
// wires together the ones that live in their own packages: the pool
// manager (pool), the pod-IP reconciler (podip) and the gRPC handlers
// (rpcserver), over the datastore. docs/architecture.md maps them.
//
// It never answers an ADD before the datastore is restored from its
// checkpoint, and never acknowledges an ADD or DEL that is not durable.
// None of its jobs imports it: it hands them interfaces and callbacks at
// construction. Of the simulators it imports only pkg/sim/devpool
// (-dev-static-pool), and pkg/ipamd/internal/testsupport only from its
// tests.
package ipamd
