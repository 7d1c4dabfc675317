package datastore

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"strconv"
	"time"
)

// Cooling addresses across a restart. An address a pod gave up rests for
// the cooldown before reuse (conntrack entries and neighbour caches still
// point at the old pod); which addresses rest, and since when, is kept in a
// sidecar file beside the checkpoint, ipam.json.cooling, never in the
// checkpoint itself: ipam.json stays byte for byte the document upstream
// writes, so an image switch either way reads it as before. The sidecar is
// written in the same group commit as the release and before the
// checkpoint, so a release is acknowledged only once both are in place; a
// crash between the two leaves the address allocated in ipam.json, and an
// allocation always wins over a cooling record at restore.
// docs/checkpoint-durability.md, "What survives a restart".

// CoolingSuffix is appended to the checkpoint's path to name the sidecar.
const CoolingSuffix = ".cooling"

// CoolingVersion is the sidecar's schema.
const CoolingVersion = "aws-node-cooling/1"

// CoolingEntry is one address resting after its release, released at
// ReleasedAt (wall time: what survives a restart).
type CoolingEntry struct {
	IP         netip.Addr
	ReleasedAt time.Time
}

// CoolingCheckpointer is a Checkpointer that also keeps the cooling
// addresses. WriteCooling is called before Write in the same commit, and
// only when a release started a cooldown since the last commit. ReadCooling
// returns nothing and no error when nothing was ever written.
type CoolingCheckpointer interface {
	WriteCooling(entries []CoolingEntry) error
	ReadCooling() ([]CoolingEntry, error)
}

// EncodeCooling appends the sidecar document for entries to dst.
func EncodeCooling(dst []byte, entries []CoolingEntry) []byte {
	dst = append(dst, `{"version":"`+CoolingVersion+`","cooling":[`...)
	for i, e := range entries {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"ip":"`...)
		dst = e.IP.AppendTo(dst)
		dst = append(dst, `","releasedAt":`...)
		dst = strconv.AppendInt(dst, e.ReleasedAt.UnixNano(), 10)
		dst = append(dst, '}')
	}
	return append(dst, "]}\n"...)
}

// DecodeCooling parses a sidecar document.
func DecodeCooling(data []byte) ([]CoolingEntry, error) {
	var doc struct {
		Version string `json:"version"`
		Cooling []struct {
			IP         string `json:"ip"`
			ReleasedAt int64  `json:"releasedAt"`
		} `json:"cooling"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("cooling sidecar: %w", err)
	}
	if doc.Version != CoolingVersion {
		return nil, fmt.Errorf("cooling sidecar: version %q (want %q)", doc.Version, CoolingVersion)
	}
	out := make([]CoolingEntry, 0, len(doc.Cooling))
	for i, e := range doc.Cooling {
		ip, err := netip.ParseAddr(e.IP)
		if err != nil || ip.Zone() != "" {
			return nil, fmt.Errorf("cooling sidecar: entry %d: bad address %q", i, e.IP)
		}
		out = append(out, CoolingEntry{IP: ip, ReleasedAt: time.Unix(0, e.ReleasedAt)})
	}
	return out, nil
}

// coolingFile returns the sidecar's writer, creating it on first use.
func (f *FileCheckpointer) coolingFile() *FileCheckpointer {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cooling == nil {
		f.cooling = &FileCheckpointer{path: f.path + CoolingSuffix, durability: f.durability}
	}
	return f.cooling
}

// WriteCooling replaces the sidecar with entries, atomically, the way Write
// replaces the checkpoint.
func (f *FileCheckpointer) WriteCooling(entries []CoolingEntry) error {
	c := f.coolingFile()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf = EncodeCooling(c.buf[:0], entries)
	return c.writeBufLocked()
}

// ReadCooling loads the sidecar. A missing file is no entries and no
// error; a sidecar that does not parse is an error (the caller starts
// without cooldowns), left in place for the operator and overwritten by
// the next release. Leftover temp files of the sidecar are removed.
func (f *FileCheckpointer) ReadCooling() ([]CoolingEntry, error) {
	c := f.coolingFile()
	c.removeStaleTemps()
	data, err := os.ReadFile(c.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cooling sidecar: read %s: %w", c.path, err)
	}
	return DecodeCooling(data)
}
