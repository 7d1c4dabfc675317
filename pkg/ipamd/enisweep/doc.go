// Package enisweep is the leaked-ENI sweep: it deletes ENIs that an
// aws-node created and then lost (a crash between CreateNetworkInterface
// and AttachNetworkInterface, a detach whose delete failed, a node that
// went away with DeleteOnTermination unset). As upstream, every hour, after
// a random delay of up to 5 minutes, it lists the detached ENIs of the VPC
// that carry the instance_id tag (and this cluster's tag when CLUSTER_NAME
// is set) and, among those whose description starts with "aws-K8S-", it
// stamps a createdAt tag on any that lack one and deletes those whose
// createdAt is at least 5 minutes old.
//
// It never deletes an ENI it has not seen detached with ipamd's tags and
// description, nor one younger than the grace period (an ENI another node
// is creating right now is detached for a moment); EC2 refuses to delete an
// attached one anyway. It owns no state between passes and reaches EC2
// only through the EC2 interface it declares. Like every job of the agent,
// it never imports pkg/ipamd or another job; the agent starts and stops it.
package enisweep
