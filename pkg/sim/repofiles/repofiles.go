// Package repofiles finds the repository's data files for the simulation
// tools, which run from the repository (go run and go test start in
// different directories of it). It only looks files up; it never writes.
package repofiles

import (
	"os"
	"path/filepath"
)

// MaxPodsFile is the repository's copy of upstream's max-pods table
// (misc/eni-max-pods.txt), found from the working directory or one of its
// parents; "" when there is none (max pods unknown).
func MaxPodsFile() string {
	return find(filepath.Join("misc", "eni-max-pods.txt"))
}

func find(rel string) string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		p := filepath.Join(dir, rel)
		if _, err := os.Stat(p); err == nil {
			return p
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}
