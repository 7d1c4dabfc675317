// Package config reads ipamd's configuration from the environment: the
// same variables as upstream aws-node, with the same defaults and parsing,
// plus this project's own (the pod-IP reconciler's, the EC2 request
// budget, the warm-pool start spread, the profiling address). It owns the
// parsing, the refusals (a setting this build does not support, a value
// upstream refuses too, an out-of-range limit of our own) and the AWS
// client settings the configuration gives.
//
// It only reads: it never builds a client, opens a socket or touches the
// node, and never imports the agent or its jobs (podip only for the
// reconciler's own settings).
package config
