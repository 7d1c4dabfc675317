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
	Symlink  string // target of a symbolic link
	Hardlink string // absolute path of a hard link's target
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
		fi := fileInfo{Mode: h.Mode & 0o7777, Uid: h.Uid, Gid: h.Gid, Size: h.Size, Dir: h.Typeflag == tar.TypeDir}
		switch h.Typeflag {
		case tar.TypeSymlink:
			fi.Symlink = h.Linkname
		case tar.TypeLink:
			fi.Hardlink = "/" + strings.TrimPrefix(path.Clean(h.Linkname), "/")
		}
		out[p] = fi
	}
}

// resolve follows symbolic links (in every component, as the kernel does)
// and hard links inside the image to the file p names.
func resolve(files map[string]fileInfo, p string) (string, fileInfo, error) {
	p = path.Clean("/" + p)
	for hops := 0; hops < 40; hops++ {
		parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
		cur, redirected := "", false
		for i, part := range parts {
			cur += "/" + part
			fi, ok := files[cur]
			if !ok {
				return "", fileInfo{}, fmt.Errorf("%s: no such file", cur)
			}
			target := fi.Symlink
			if target == "" {
				target = fi.Hardlink
			}
			if target == "" {
				continue
			}
			if !path.IsAbs(target) {
				target = path.Join(path.Dir(cur), target)
			}
			p = path.Join(append([]string{target}, parts[i+1:]...)...)
			redirected = true
			break
		}
		if !redirected {
			return p, files[p], nil
		}
	}
	return "", fileInfo{}, fmt.Errorf("%s: too many levels of links", p)
}

// lookPath finds prog in the image's PATH, like a shell would, and
// returns the resolved file.
func lookPath(files map[string]fileInfo, env []string, prog string) (string, error) {
	var dirs []string
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "PATH="); ok {
			dirs = strings.Split(v, ":")
		}
	}
	var tried []string
	for _, d := range dirs {
		if d == "" {
			continue
		}
		real, fi, err := resolve(files, path.Join(d, prog))
		if err != nil {
			continue
		}
		if fi.Dir || fi.Mode&0o111 == 0 {
			tried = append(tried, fmt.Sprintf("%s -> %s is not an executable file", path.Join(d, prog), real))
			continue
		}
		return real, nil
	}
	if len(tried) > 0 {
		return "", fmt.Errorf("%s", strings.Join(tried, "; "))
	}
	return "", fmt.Errorf("not found in PATH %q", strings.Join(dirs, ":"))
}

// checkOptions relax a check.
type checkOptions struct {
	Optional map[string]bool // image file names that may be absent
	// AllowNoIPTables accepts a release image without iptables and
	// ip6tables (a test image built FROM scratch); ipamd cannot program
	// SNAT or connmark rules in it.
	AllowNoIPTables bool
}

// checkImage verifies a built image against the layout of k: every
// required file present, root-owned, with its mode; the config's
// entrypoint/cmd, working directory, PATH and platform; for a release
// image, iptables and ip6tables on PATH resolving to executables. It
// returns a listing of the working directory for the log and warnings
// (a not-deployable label) that do not fail the check.
func checkImage(img v1.Image, k kind, arch string, o checkOptions) (listingText string, warnings []string, err error) {
	cfg, err := img.ConfigFile()
	if err != nil {
		return "", nil, err
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
	if r := cfg.Config.Labels[labelNotDeployable]; r != "" {
		warnings = append(warnings, "image is marked not deployable: "+r)
	}
	files, err := listFiles(img)
	if err != nil {
		return "", nil, err
	}
	for _, f := range requiredFiles(k) {
		fi, ok := files[f.Path]
		switch {
		case !ok && o.Optional[path.Base(f.Path)]:
		case !ok:
			bad("missing %s", f.Path)
		case fi.Mode != f.Mode:
			bad("%s has mode %04o, want %04o", f.Path, fi.Mode, f.Mode)
		case fi.Uid != 0 || fi.Gid != 0:
			bad("%s owned by %d:%d, want root", f.Path, fi.Uid, fi.Gid)
		}
	}
	if k.Name == "release" {
		for _, prog := range []string{"iptables", "ip6tables"} {
			real, err := lookPath(files, cfg.Config.Env, prog)
			if err == nil && path.Base(real) == "iptables-wrapper" {
				err = wrapperBackends(files)
			}
			switch {
			case err != nil && o.AllowNoIPTables:
				warnings = append(warnings, fmt.Sprintf("%s: %v (allowed by -allow-no-iptables; ipamd cannot program its rules in this image)", prog, err))
			case err != nil:
				bad("%s: %v: ipamd needs it for SNAT and connmark rules (build on the eks-distro iptables base, or pass -allow-no-iptables for a test image)", prog, err)
			}
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
		return strings.Join(listing, "\n"), warnings, fmt.Errorf("image check failed:\n  %s", strings.Join(problems, "\n  "))
	}
	return strings.Join(listing, "\n"), warnings, nil
}

// wrapperBackends reports why iptables-wrapper could not work in the image:
// it picks one mode, nft or legacy, for both families, so some mode needs
// both /usr/sbin/iptables-<mode> and /usr/sbin/ip6tables-<mode> (IPv6
// clusters need the second for the egress and REJECT rules).
func wrapperBackends(files map[string]fileInfo) error {
	var missing []string
	for _, mode := range []string{"nft", "legacy"} {
		var lack []string
		for _, prog := range []string{"iptables", "ip6tables"} {
			p := "/usr/sbin/" + prog + "-" + mode
			if _, fi, err := resolve(files, p); err != nil || fi.Dir || fi.Mode&0o111 == 0 {
				lack = append(lack, p)
			}
		}
		if len(lack) == 0 {
			return nil
		}
		missing = append(missing, strings.Join(lack, " and "))
	}
	return fmt.Errorf("iptables-wrapper found, but no mode it can select has both families: missing %s", strings.Join(missing, "; missing "))
}
