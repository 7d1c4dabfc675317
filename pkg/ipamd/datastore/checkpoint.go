package datastore

import (
	"net/netip"
	"time"
)

// CheckpointVersion is the schema string upstream aws-node writes and
// accepts; keeping it lets a node switch images in either direction.
const CheckpointVersion = "vpc-cni-ipam/1"

// CheckpointEntry is one persisted allocation.
type CheckpointEntry struct {
	Key        IPAMKey
	IP         netip.Addr
	AssignedAt time.Time
	Metadata   IPAMMetadata
	// Encoded, when set, is this entry's JSON object exactly as
	// EncodeCheckpoint would write it; the datastore caches it per
	// assignment so a checkpoint write only concatenates. Never modified
	// once set.
	Encoded []byte
}

// Checkpointer persists the full set of allocations. Write must not return
// before the data is durable: whatever happens to ipamd afterwards, its
// next start reads this document or a later one (FileCheckpointer: the
// atomic replace is done; a power loss is the exception its Durability
// states). Read returns no entries and no error when nothing was ever
// written.
type Checkpointer interface {
	Write(entries []CheckpointEntry) error
	Read() ([]CheckpointEntry, error)
}
