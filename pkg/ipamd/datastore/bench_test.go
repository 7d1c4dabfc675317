package datastore

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// benchNode is a node shape: ENIs x secondary /32 addresses, with some
// addresses already held by pods.
type benchNode struct {
	name         string
	enis, perENI int
	prefill      int
}

var benchNodes = []benchNode{
	{name: "30", enis: 3, perENI: 10},
	{name: "735", enis: 15, perENI: 49, prefill: 700},
}

func benchENIID(i int) string { return fmt.Sprintf("eni-%017x", 0xb000+i) }

// benchAddr is the j-th address of ENI i.
func benchAddr(i, j int) netip.Addr { return netip.AddrFrom4([4]byte{10, 0, byte(i), byte(10 + j)}) }

func addBenchENIs(tb testing.TB, d *DataStore, n benchNode) {
	tb.Helper()
	for i := range n.enis {
		addSecondaryENI(tb, d, benchENIID(i), i, benchAddr(i, 0).String(), n.perENI)
	}
}

// benchEntries is a checkpoint holding count of n's addresses.
func benchEntries(n benchNode, count int) []CheckpointEntry {
	at := time.Unix(1_718_000_000, 0)
	out := make([]CheckpointEntry, 0, count)
	for k := range count {
		i, j := k/n.perENI, k%n.perENI
		m := meta(podName(k))
		m.K8SPodNamespace = "team-" + fmt.Sprint(k%7)
		out = append(out, CheckpointEntry{Key: key(containerID(k)), IP: benchAddr(i, j), AssignedAt: at.Add(time.Duration(k) * time.Millisecond), Metadata: m})
	}
	return out
}

// newBenchStore returns a store (no cooldown) for n with n.prefill addresses
// assigned; cp may be nil (memory only).
func newBenchStore(b *testing.B, cp Checkpointer, n benchNode) *DataStore {
	b.Helper()
	d := New(Config{Checkpointer: cp})
	b.Cleanup(func() { _ = d.Close() })
	addBenchENIs(b, d, n)
	if n.prefill == 0 {
		return d
	}
	if cp == nil {
		for _, e := range benchEntries(n, n.prefill) {
			if _, err := d.Assign(e.Key, e.Metadata); err != nil {
				b.Fatal(err)
			}
		}
	} else {
		// One write instead of one durable write per pod.
		if err := cp.Write(benchEntries(n, n.prefill)); err != nil {
			b.Fatal(err)
		}
		rep, err := d.Restore()
		if err != nil || rep.Restored != n.prefill {
			b.Fatalf("prefill: restored %d of %d: %v", rep.Restored, n.prefill, err)
		}
	}
	if got := d.Stats().AssignedIPs; got != n.prefill {
		b.Fatalf("prefill: %d assigned, want %d", got, n.prefill)
	}
	return d
}

func newBenchFileCheckpointer(b *testing.B) *FileCheckpointer {
	b.Helper()
	fc, err := NewFileCheckpointer(filepath.Join(b.TempDir(), "ipam.json"))
	if err != nil {
		b.Fatal(err)
	}
	return fc
}

// BenchmarkAssignRelease: one ADD and one DEL per op, by where the
// checkpoint goes: nowhere, memory, or a file ("disk": atomic replace, the
// default; "disk-synced": with the two fsyncs per write of the Synced
// policy). The file is in $TMPDIR: run it on a disk and on tmpfs.
func BenchmarkAssignRelease(b *testing.B) {
	checkpointers := []struct {
		name string
		make func(b *testing.B) Checkpointer
	}{
		{"mem", func(*testing.B) Checkpointer { return nil }},
		{"memcp", func(*testing.B) Checkpointer { return &MemoryCheckpointer{} }},
		{"disk", func(b *testing.B) Checkpointer { return newBenchFileCheckpointer(b) }},
		{"disk-synced", func(b *testing.B) Checkpointer {
			fc := newBenchFileCheckpointer(b)
			fc.SetDurability(Synced)
			return fc
		}},
	}
	for _, c := range checkpointers {
		b.Run(c.name, func(b *testing.B) {
			for _, n := range benchNodes {
				b.Run(n.name, func(b *testing.B) {
					d := newBenchStore(b, c.make(b), n)
					k, m := key(containerID(1_000_000)), meta("bench-pod")
					b.ReportAllocs()
					for b.Loop() {
						if _, err := d.Assign(k, m); err != nil {
							b.Fatal(err)
						}
						if _, err := d.Release(k); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		})
	}
}

// countingCheckpointer counts writes, to show how many pairs share one.
type countingCheckpointer struct {
	Checkpointer
	writes atomic.Int64
}

func (c *countingCheckpointer) Write(e []CheckpointEntry) error {
	c.writes.Add(1)
	return c.Checkpointer.Write(e)
}

// BenchmarkConcurrentAssign: ADD+DEL pairs on a 735-address node with the
// checkpoint on disk, from one goroutine and from 32 at once (b.N pairs in
// all); group commit lets concurrent pairs share fsyncs.
func BenchmarkConcurrentAssign(b *testing.B) {
	n := benchNodes[1]
	for _, workers := range []int{1, 32} {
		name := "seq"
		if workers > 1 {
			name = fmt.Sprintf("par%d", workers)
		}
		b.Run(name, func(b *testing.B) {
			cp := &countingCheckpointer{Checkpointer: newBenchFileCheckpointer(b)}
			d := newBenchStore(b, cp, n)
			if free := n.enis*n.perENI - n.prefill; free < workers {
				b.Fatalf("%d free addresses for %d workers", free, workers)
			}
			keys := make([]IPAMKey, workers)
			for w := range keys {
				keys[w] = key(containerID(2_000_000 + w))
			}
			m := meta("bench-pod")
			writes0 := cp.writes.Load()
			b.ReportAllocs()
			b.ResetTimer()
			var wg sync.WaitGroup
			for w := range workers {
				pairs := b.N / workers
				if w < b.N%workers {
					pairs++
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range pairs {
						if _, err := d.Assign(keys[w], m); err != nil {
							b.Error(err)
							return
						}
						if _, err := d.Release(keys[w]); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
			b.ReportMetric(float64(cp.writes.Load()-writes0)/float64(b.N), "writes/pair")
		})
	}
}

// BenchmarkRestore735: a fresh store with the node's ENIs restores a
// 735-allocation checkpoint file (read, decode, re-assign, rewrite). The ENI
// setup is not timed.
func BenchmarkRestore735(b *testing.B) {
	n := benchNode{name: "735", enis: 15, perENI: 49}
	fc := newBenchFileCheckpointer(b)
	if err := fc.Write(benchEntries(n, n.enis*n.perENI)); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		d := New(Config{Checkpointer: fc})
		addBenchENIs(b, d, n)
		b.StartTimer()
		rep, err := d.Restore()
		b.StopTimer()
		if err != nil || rep.Restored != 735 {
			b.Fatalf("restored %d: %v", rep.Restored, err)
		}
		if err := d.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// BenchmarkEncodeCheckpoint735: the document written on every ADD and DEL,
// by our encoder and, for scale, by encoding/json (what upstream uses).
func BenchmarkEncodeCheckpoint735(b *testing.B) {
	entries := benchEntries(benchNode{enis: 15, perENI: 49}, 735)
	b.Run("ours", func(b *testing.B) {
		var buf []byte
		b.ReportAllocs()
		for b.Loop() {
			buf = EncodeCheckpoint(buf[:0], entries)
		}
		b.SetBytes(int64(len(buf)))
	})
	b.Run("encoding-json", func(b *testing.B) {
		doc := upstreamDocOf(entries)
		var buf bytes.Buffer
		b.ReportAllocs()
		for b.Loop() {
			buf.Reset()
			if err := json.NewEncoder(&buf).Encode(doc); err != nil {
				b.Fatal(err)
			}
		}
		b.SetBytes(int64(buf.Len()))
	})
}
