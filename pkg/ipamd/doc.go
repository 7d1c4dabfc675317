// Package ipamd is the node agent's daemon: it owns the datastore's lifecycle
// (restore at start, flush at stop), serves the CNI plugin's gRPC API on its
// unix socket, and exposes introspection and Prometheus metrics. Each job is
// in its own file: config, rpc handler and server, introspection, metrics,
// agent wiring.
//
// It never answers an ADD before the datastore is restored from its
// checkpoint, and never acknowledges an ADD or DEL that is not durable.
package ipamd
