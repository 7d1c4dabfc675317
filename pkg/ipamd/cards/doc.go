// Package cards owns the ordered set of ipamd's per-network-card
// datastores (ENABLE_MULTI_NIC): one datastore.DataStore per managed card,
// card 0 first, and the operations that span them: a single-IP assign
// that falls through to the next card only when a card has no free
// address, a multi-NIC assign that gives a pod one address on every card
// or none, a release of a key from every card that holds it, the summed
// pool figures, and per-card access.
//
// It guarantees that:
//   - with one card (ENABLE_MULTI_NIC off) every operation is card 0's
//     store's own, with the store's own errors;
//   - a multi-NIC assign that fails on card k gives back what it assigned
//     on the cards before k, and the error names card k;
//   - a failure on one card never stops a release on the others.
//
// It holds no state beyond the list of stores, which is fixed when the set
// is built, and does no I/O of its own: each store persists its own
// checkpoint (datastore.CheckpointPathForCard). It never imports the agent
// or any package under pkg/ipamd but the datastore.
package cards
