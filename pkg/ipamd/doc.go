// Package ipamd is the node agent's daemon: it owns the datastore's lifecycle
// (restore at start, flush at stop), serves the CNI plugin's gRPC API on its
// unix socket, and builds and starts the jobs that live in packages of
// their own. It holds only the agent's part: options, construction,
// start-up (agent_start.go: named phases, in order), run and stop (Run
// starts every job from one list, jobs), and its own metrics.
// The jobs are the pool manager (pool), the pod-IP reconciler and DEL-queue
// replay (podip), the gRPC handlers (rpcserver), the IMDS refresh
// (imdsrefresh), the leaked-ENI sweep (enisweep) and the introspection and
// metrics endpoints (introspect served by httpserve); the configuration is
// read by config, start-up uses node init (nodeinit), the host network
// wiring (hostnet) and the checkpoint restore (restore), a failed ADD is
// explained from what addfailsource gathers, and /metrics serves the pool
// gauges (poolgauges). docs/architecture.md maps them.
//
// It never answers an ADD before the datastore is restored from its
// checkpoint, and never acknowledges an ADD or DEL that is not durable.
// None of its jobs imports it: it hands them interfaces and callbacks at
// construction. Of the simulators it imports only pkg/sim/devpool
// (-dev-static-pool), and pkg/ipamd/internal/testsupport only from its
// tests.
package ipamd
