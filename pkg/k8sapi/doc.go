// Package k8sapi is ipamd's narrow access to the Kubernetes API: its own
// node's pod capacity and unschedulable taint, and events on that node. It owns nothing else:
// ipamd keeps working (with a less precise max-pods and log-only events)
// when the API server cannot be reached. Events go out asynchronously
// through client-go's event broadcaster; posting one never waits on the
// API server. It never imports pkg/ipamd/...: ipamd uses it, never the
// other way round.
package k8sapi
