package main

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// loadAverage is /proc/loadavg's first three fields ("0.52 0.61 0.70").
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// diskLoad keeps the disk under dir busy with synced 4 MiB writes from two
// writers, each rewriting its own 256 MiB file, until the returned stop is
// called; stop removes the files.
func diskLoad(dir string) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	buf := make([]byte, 4<<20)
	var files []string
	for range 2 {
		f, err := os.CreateTemp(dir, "benchreport-load-*")
		if err != nil {
			continue
		}
		files = append(files, f.Name())
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer f.Close()
			var off int64
			for {
				select {
				case <-done:
					return
				default:
				}
				if _, err := f.WriteAt(buf, off); err != nil {
					return
				}
				_ = f.Sync()
				off = (off + int64(len(buf))) % (256 << 20)
			}
		}()
	}
	return func() {
		close(done)
		wg.Wait()
		for _, p := range files {
			_ = os.Remove(p)
		}
	}
}

// diskDir is where the disk-busy job's load goes: the filesystem that
// holds the benchmarks' temporary directories.
func diskDir() string {
	if d := os.Getenv("TMPDIR"); d != "" {
		return d
	}
	return filepath.Clean(os.TempDir())
}
