// Package rpcserver owns ipamd's gRPC surface on its unix socket: the CNI
// backend (AddNetwork, DelNetwork) and config server the plugin and the
// network-policy agent call, the maintenance service behind the plugin's
// CNI 1.1 GC and STATUS verbs, request validation, the health service and
// the request metrics. Message names, fields and reply texts are upstream's
// wire contract.
//
// With security groups for pods (Deps.PodSource set, ENABLE_POD_ENI) every
// ADD looks its pod up first; a pod that asks for a branch ENI is answered
// from its vpc.amazonaws.com/pod-eni annotation (pkg/ipamd/podeni) and
// never reaches the datastore, and a DEL the datastore does not know is
// answered from the pod as upstream does.
//
// Addresses come from the node's datastores, one per managed network card
// (pkg/ipamd/cards): a single-IP pod gets card 0's address, or the next
// card's when a card has none free; a pod that asks for a multi-NIC
// attachment (ENABLE_MULTI_NIC) gets one address per card, in card order,
// or none; a DEL releases the key on every card.
//
// It holds no state of its own: it works through the small interfaces and
// funcs in Options.Deps (allocate/release, stats, GC, reclaim), and never
// imports the agent (pkg/ipamd), the pool manager or the reconciler.
package rpcserver
