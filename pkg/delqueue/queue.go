package delqueue

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// DefaultDir is where the plugin queues DELs on the host.
const DefaultDir = "/var/run/aws-node/del-queue"

// Version of the entry format.
const Version = 1

// maxEntryBytes bounds what Read accepts from one file.
const maxEntryBytes = 16 << 10

// Entry is one queued DEL.
type Entry struct {
	Version      int       `json:"version"`
	ContainerID  string    `json:"containerID"`
	IfName       string    `json:"ifName"`
	NetworkName  string    `json:"networkName"`
	PodNamespace string    `json:"podNamespace,omitempty"`
	PodName      string    `json:"podName,omitempty"`
	PodUID       string    `json:"podUID,omitempty"`
	Reason       string    `json:"reason,omitempty"`
	QueuedAt     time.Time `json:"queuedAt"`
}

// ErrBadEntry marks a file that is not a valid entry.
var ErrBadEntry = errors.New("delqueue: bad entry")

func (e Entry) validate() error {
	switch {
	case e.Version != Version:
		return fmt.Errorf("%w: version %d", ErrBadEntry, e.Version)
	case !safeName(e.ContainerID) || !safeName(e.IfName):
		return fmt.Errorf("%w: container ID %q / interface %q", ErrBadEntry, e.ContainerID, e.IfName)
	case e.NetworkName == "":
		return fmt.Errorf("%w: no network name", ErrBadEntry)
	}
	return nil
}

// safeName accepts what can be part of a file name without escaping the
// directory: non-empty, at most 256 bytes, no path separators or dots-only.
func safeName(s string) bool {
	return s != "" && len(s) <= 256 && !strings.ContainsAny(s, "/\\\x00") && s != "." && s != ".."
}

func fileName(containerID, ifName string) string { return containerID + "_" + ifName + ".json" }

// Write queues e durably. A second entry for the same interface replaces
// the first.
func Write(dir string, e Entry) error {
	e.Version = Version
	if e.QueuedAt.IsZero() {
		e.QueuedAt = time.Now().UTC()
	}
	if err := e.validate(); err != nil {
		return err
	}
	data, err := json.Marshal(e)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("delqueue: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return fmt.Errorf("delqueue: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("delqueue: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("delqueue: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("delqueue: %w", err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, fileName(e.ContainerID, e.IfName))); err != nil {
		return fmt.Errorf("delqueue: %w", err)
	}
	return syncDir(dir)
}

// Bad is a queue file that could not be read as an entry.
type Bad struct {
	Path string
	Err  error
}

// List returns the queued entries, oldest first, and the files it could
// not use. A missing directory is an empty queue.
func List(dir string) ([]Entry, []Bad) {
	names, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, []Bad{{Path: dir, Err: err}}
	}
	var out []Entry
	var bad []Bad
	if n, rbad := recoverTaken(dir, names); n > 0 {
		bad = append(bad, rbad...)
		if names, err = os.ReadDir(dir); err != nil {
			return nil, append(bad, Bad{Path: dir, Err: err})
		}
	}
	for _, n := range names {
		if !n.Type().IsRegular() || !strings.HasSuffix(n.Name(), ".json") {
			continue
		}
		path := filepath.Join(dir, n.Name())
		e, err := read(path)
		if err != nil {
			bad = append(bad, Bad{Path: path, Err: err})
			continue
		}
		out = append(out, e)
	}
	sortByTime(out)
	return out, bad
}

// read decodes the entry at path, which must be named after its key.
func read(path string) (Entry, error) {
	e, err := decode(path)
	if err != nil {
		return Entry{}, err
	}
	if filepath.Base(path) != fileName(e.ContainerID, e.IfName) {
		return Entry{}, fmt.Errorf("%w: file name does not match its content", ErrBadEntry)
	}
	return e, nil
}

// decode reads and validates one entry, whatever the file's name.
func decode(path string) (Entry, error) {
	f, err := os.Open(path)
	if err != nil {
		return Entry{}, err
	}
	defer f.Close()
	var e Entry
	dec := json.NewDecoder(&limitedReader{f: f, n: maxEntryBytes})
	if err := dec.Decode(&e); err != nil {
		return Entry{}, fmt.Errorf("%w: %v", ErrBadEntry, err)
	}
	if err := e.validate(); err != nil {
		return Entry{}, err
	}
	return e, nil
}

type limitedReader struct {
	f *os.File
	n int64
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, fmt.Errorf("%w: larger than %d bytes", ErrBadEntry, maxEntryBytes)
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.f.Read(p)
	l.n -= int64(n)
	return n, err
}

func sortByTime(es []Entry) {
	for i := 1; i < len(es); i++ {
		for j := i; j > 0 && es[j].QueuedAt.Before(es[j-1].QueuedAt); j-- {
			es[j], es[j-1] = es[j-1], es[j]
		}
	}
}
