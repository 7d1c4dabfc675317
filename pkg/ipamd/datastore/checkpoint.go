package datastore

import (
	"net/netip"
	"sync"
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
// before the data is durable. Read returns no entries and no error when
// nothing was ever written.
type Checkpointer interface {
	Write(entries []CheckpointEntry) error
	Read() ([]CheckpointEntry, error)
}

// MemoryCheckpointer keeps the last written document in memory, encoded as
// the file would be. For tests and the in-memory benchmarks.
type MemoryCheckpointer struct {
	mu      sync.Mutex
	data    []byte
	writes  int
	FailErr error // when set, Write fails with it
}

// Write encodes entries and keeps them.
func (m *MemoryCheckpointer) Write(entries []CheckpointEntry) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.FailErr != nil {
		return m.FailErr
	}
	m.data = EncodeCheckpoint(m.data[:0], entries)
	m.writes++
	return nil
}

// Read decodes the last document written.
func (m *MemoryCheckpointer) Read() ([]CheckpointEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.data == nil {
		return nil, nil
	}
	return DecodeCheckpoint(m.data)
}

// Bytes returns a copy of the last document written.
func (m *MemoryCheckpointer) Bytes() []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]byte(nil), m.data...)
}

// Writes counts successful writes.
func (m *MemoryCheckpointer) Writes() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.writes
}

// SetFail makes later writes fail with err (nil to succeed again).
func (m *MemoryCheckpointer) SetFail(err error) {
	m.mu.Lock()
	m.FailErr = err
	m.mu.Unlock()
}
