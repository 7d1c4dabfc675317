package main

import (
	"archive/tar"
	"fmt"
	"io"
	"path"
	"slices"
	"sort"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// fileInfo is one file of an image's flattened filesystem.
type fileInfo struct {
	Mode     int64
	Uid, Gid int
	Size     int64
	Dir      bool
}

// listFiles flattens img (whiteouts applied) into path -> info, paths
// absolute.
func listFiles(img v1.Image) (map[string]fileInfo, error) {
	rc := mutate.Extract(img)
	defer rc.Close()
	out := map[string]fileInfo{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		p := "/" + strings.TrimSuffix(path.Clean(h.Name), "/")
		out[p] = fileInfo{Mode: h.Mode & 0o7777, Uid: h.Uid, Gid: h.Gid, Size: h.Size, Dir: h.Typeflag == tar.TypeDir}
	}
}

// checkImage verifies a built image against the layout of k: every
// required file present, root-owned, with its mode; the config's
// entrypoint/cmd, working directory, PATH and platform. Names in optional
// may be absent. It returns a
// listing of the working directory for the log.
func checkImage(img v1.Image, k kind, arch string, optional map[string]bool) (string, error) {
	cfg, err := img.ConfigFile()
	if err != nil {
		return "", err
	}
	var problems []string
	bad := func(format string, a ...any) { problems = append(problems, fmt.Sprintf(format, a...)) }
	if cfg.OS != "linux" || cfg.Architecture != arch {
		bad("platform %s/%s, want linux/%s", cfg.OS, cfg.Architecture, arch)
	}
	if cfg.Config.WorkingDir != k.Dir {
		bad("working dir %q, want %q", cfg.Config.WorkingDir, k.Dir)
	}
	if !slices.Equal(cfg.Config.Entrypoint, k.Entrypoint) {
		bad("entrypoint %q, want %q", cfg.Config.Entrypoint, k.Entrypoint)
	}
	if !slices.Equal(cfg.Config.Cmd, k.Cmd) {
		bad("cmd %q, want %q", cfg.Config.Cmd, k.Cmd)
	}
	if !slices.ContainsFunc(cfg.Config.Env, func(e string) bool { return strings.HasPrefix(e, "PATH=") }) {
		bad("no PATH in the environment")
	}
	files, err := listFiles(img)
	if err != nil {
		return "", err
	}
	var required []file
	switch k.Name {
	case "release":
		required = releaseFiles(sources{})
	case "init":
		required = []file{{Path: "/init/aws-vpc-cni-init", Mode: modeBinary}}
	}
	for _, f := range required {
		fi, ok := files[f.Path]
		switch {
		case !ok && optional[path.Base(f.Path)]:
		case !ok:
			bad("missing %s", f.Path)
		case fi.Mode != f.Mode:
			bad("%s has mode %04o, want %04o", f.Path, fi.Mode, f.Mode)
		case fi.Uid != 0 || fi.Gid != 0:
			bad("%s owned by %d:%d, want root", f.Path, fi.Uid, fi.Gid)
		}
	}
	var paths, listing []string
	for p, fi := range files {
		if strings.HasPrefix(p, k.Dir+"/") && !fi.Dir {
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	for _, p := range paths {
		fi := files[p]
		listing = append(listing, fmt.Sprintf("%04o %d:%d %10d %s", fi.Mode, fi.Uid, fi.Gid, fi.Size, p))
	}
	if len(problems) > 0 {
		return strings.Join(listing, "\n"), fmt.Errorf("image check failed:\n  %s", strings.Join(problems, "\n  "))
	}
	return strings.Join(listing, "\n"), nil
}
