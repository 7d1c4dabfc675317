package main

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// labelNotDeployable marks an image built on scratch or a local tarball;
// its value says why. -check warns about it and -push refuses it unless
// told otherwise.
const labelNotDeployable = "com.github.aws.amazon-vpc-cni-k8s.not-deployable"

// buildOptions are one image build.
type buildOptions struct {
	Kind    kind
	Base    string // "scratch", a `docker save`-style tarball or an image reference
	Sources sources
	OS      string // always linux
	Arch    string
	// Alternative is the iptables alternative selected the way
	// upstream's Dockerfile does (`update-alternatives --set iptables
	// <Alternative>`); "" selects none. Ignored on scratch, which has no
	// alternatives.
	Alternative string
	// Created stamps the layer's files and the config, so the same inputs
	// give the same image digest.
	Created time.Time
}

// buildResult is the image plus what the caller reports.
type buildResult struct {
	Image         v1.Image
	Missing       []string // optional files left out
	NotDeployable string   // reason, "" for a registry base
}

// build assembles the image: the base, plus one layer holding the
// WORKDIR with the kind's files owned by root, plus (release, not on
// scratch) one layer with the links `update-alternatives --set` makes,
// plus the config upstream's Dockerfiles set.
func build(ctx context.Context, o buildOptions) (buildResult, error) {
	base, err := loadBase(ctx, o.Base, o.Arch)
	if err != nil {
		return buildResult{}, err
	}
	baseCfg, err := base.Image.ConfigFile()
	if err != nil {
		return buildResult{}, fmt.Errorf("base config: %w", err)
	}
	if a := baseCfg.Architecture; base.Source != baseScratch && a != "" && a != o.Arch {
		return buildResult{}, fmt.Errorf("base image is %s/%s, want %s/%s", baseCfg.OS, a, o.OS, o.Arch)
	}
	files, missing, err := filesFor(o.Kind, o.Sources)
	if err != nil {
		return buildResult{}, err
	}
	entries, err := copyEntries(o.Kind.Dir, files)
	if err != nil {
		return buildResult{}, err
	}
	var names []string
	for _, f := range files {
		names = append(names, path.Base(f.Path))
	}
	img, err := appendLayer(base.Image, entries, o.Created,
		fmt.Sprintf("build-image: COPY %s %s/", strings.Join(names, " "), o.Kind.Dir))
	if err != nil {
		return buildResult{}, err
	}
	if o.Kind.Name == "release" && o.Alternative != "" && base.Source != baseScratch {
		if img, err = selectAlternative(img, "iptables", o.Alternative, o.Created); err != nil {
			return buildResult{}, fmt.Errorf("base %s: %w (pass -iptables-alternative= to skip this step; make image IMAGE_IPTABLES_ALTERNATIVE=)", base.Name, err)
		}
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return buildResult{}, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = o.OS, o.Arch
	cfg.Created = v1.Time{Time: o.Created}
	cfg.Config.WorkingDir = o.Kind.Dir
	cfg.Config.Entrypoint = o.Kind.Entrypoint
	cfg.Config.Cmd = o.Kind.Cmd
	cfg.Config.Env = withPath(cfg.Config.Env)
	reason := base.notDeployable()
	if reason != "" {
		labels := map[string]string{}
		for k, v := range cfg.Config.Labels {
			labels[k] = v
		}
		labels[labelNotDeployable] = reason
		cfg.Config.Labels = labels
	}
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		return buildResult{}, err
	}
	return buildResult{Image: img, Missing: missing, NotDeployable: reason}, nil
}

// selectAlternative reads the base's admin file of group and appends the
// layer `update-alternatives --set group target` would have written.
func selectAlternative(img v1.Image, group, target string, created time.Time) (v1.Image, error) {
	adminPath := path.Join(alternativesAdminDir, group)
	data, err := readImageFile(img, adminPath)
	if err != nil {
		return nil, fmt.Errorf("update-alternatives --set %s %s: %w", group, target, err)
	}
	g, err := parseAlternatives(group, data)
	if err != nil {
		return nil, err
	}
	links, admin, err := g.set(target)
	if err != nil {
		return nil, err
	}
	var entries []layerEntry
	for _, l := range links {
		entries = append(entries, layerEntry{Path: l.Path, Type: tar.TypeSymlink, Mode: 0o777, Link: l.Target})
	}
	entries = append(entries, layerEntry{Path: adminPath, Type: tar.TypeReg, Mode: modeData, Data: admin})
	return appendLayer(img, withParents(entries), created,
		fmt.Sprintf("build-image: RUN update-alternatives --set %s %s (links written directly)", group, target))
}

// readImageFile returns the content of p in img's flattened filesystem.
func readImageFile(img v1.Image, p string) ([]byte, error) {
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	want := strings.TrimPrefix(p, "/")
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil, fmt.Errorf("%s: not in the image", p)
		}
		if err != nil {
			return nil, err
		}
		if path.Clean(h.Name) == want && h.Typeflag == tar.TypeReg {
			return io.ReadAll(tr)
		}
	}
}

// layerEntry is one tar entry of a layer we write.
type layerEntry struct {
	Path string // absolute
	Type byte
	Mode int64
	Data []byte // regular files
	Link string // symlinks
}

// copyEntries are dir and its files, read from the build machine.
func copyEntries(dir string, files []file) ([]layerEntry, error) {
	var entries []layerEntry
	for _, f := range files {
		data, err := os.ReadFile(f.Src)
		if err != nil {
			return nil, err
		}
		entries = append(entries, layerEntry{Path: f.Path, Type: tar.TypeReg, Mode: f.Mode, Data: data})
	}
	if len(entries) == 0 {
		entries = append(entries, layerEntry{Path: dir, Type: tar.TypeDir, Mode: modeDir})
	}
	return withParents(entries), nil
}

// withParents puts the parent directories of the entries first, outermost
// first, each once, in the order they are first needed.
func withParents(entries []layerEntry) []layerEntry {
	seen := map[string]bool{}
	var dirs []layerEntry
	for _, e := range entries {
		var chain []string
		for d := path.Dir(e.Path); d != "/" && d != "."; d = path.Dir(d) {
			chain = append([]string{d}, chain...)
		}
		if e.Type == tar.TypeDir {
			chain = append(chain, e.Path)
		}
		for _, d := range chain {
			if !seen[d] {
				seen[d] = true
				dirs = append(dirs, layerEntry{Path: d, Type: tar.TypeDir, Mode: modeDir})
			}
		}
	}
	var out []layerEntry
	out = append(out, dirs...)
	for _, e := range entries {
		if e.Type != tar.TypeDir {
			out = append(out, e)
		}
	}
	return out
}

// appendLayer adds entries as one root-owned layer with fixed times.
func appendLayer(img v1.Image, entries []layerEntry, created time.Time, createdBy string) (v1.Image, error) {
	data, err := layerTarball(entries, created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	})
	if err != nil {
		return nil, err
	}
	return mutate.Append(img, mutate.Addendum{
		Layer: layer,
		History: v1.History{
			Created:   v1.Time{Time: created},
			CreatedBy: createdBy,
			Comment:   "assembled without a container engine by cmd/tools/build-image",
		},
	})
}

// withPath keeps the base's environment and adds a PATH if it has none.
// Upstream's Dockerfiles set no other variable.
func withPath(env []string) []string {
	for _, e := range env {
		if strings.HasPrefix(e, "PATH=") {
			return env
		}
	}
	return append(append([]string(nil), env...), defaultPath)
}

// layerTarball writes entries as an uncompressed tar, root-owned, with
// fixed times.
func layerTarball(entries []layerEntry, created time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		name := strings.TrimPrefix(e.Path, "/")
		if e.Type == tar.TypeDir {
			name += "/"
		}
		h := &tar.Header{
			Typeflag: e.Type, Name: name, Mode: e.Mode, Size: int64(len(e.Data)), Linkname: e.Link,
			Uid: 0, Gid: 0, Uname: "root", Gname: "root",
			ModTime: created, Format: tar.FormatPAX,
		}
		if e.Type != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if e.Type == tar.TypeReg {
			if _, err := tw.Write(e.Data); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
