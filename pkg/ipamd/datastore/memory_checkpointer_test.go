package datastore

import "sync"

// MemoryCheckpointer keeps the last written document in memory, encoded as
// the file would be. Test-only: the datastore tests and the in-memory benchmarks.
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
