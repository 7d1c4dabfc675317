// Package k8sapi is ipamd's narrow access to the Kubernetes API: its own
// node's pod capacity and unschedulable taint, events on that node, the
// wait for the API server at start, and (ANNOTATE_POD_IP) each pod's IP
// annotation, written in the background so no CNI call waits on the API
// server, and (ENABLE_POD_ENI) the features ipamd adds to its node's
// CNINode (cninode.go; it never creates, deletes or strips one) and the
// cache of its node's pods every ADD looks up (pods.go). It owns nothing
// else:
// ipamd keeps working (with a less precise max-pods and log-only events)
// when the API server cannot be reached. Events go out asynchronously
// through client-go's event broadcaster; posting one never waits on the
// API server. It never imports pkg/ipamd/...: ipamd uses it, never the
// other way round.
package k8sapi
