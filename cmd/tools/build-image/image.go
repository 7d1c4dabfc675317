package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// buildOptions are one image build.
type buildOptions struct {
	Kind    kind
	Base    string // "scratch" or a `docker save`-style tarball
	Sources sources
	OS      string // always linux
	Arch    string
	// Created stamps the layer's files and the config, so the same inputs
	// give the same image digest.
	Created time.Time
}

// build assembles the image: the base, plus one layer holding the
// WORKDIR with the kind's files owned by root, plus the config upstream's
// Dockerfiles set. It returns the files left out as optional.
func build(o buildOptions) (v1.Image, []string, error) {
	base, err := loadBase(o.Base)
	if err != nil {
		return nil, nil, err
	}
	baseCfg, err := base.ConfigFile()
	if err != nil {
		return nil, nil, fmt.Errorf("base config: %w", err)
	}
	if a := baseCfg.Architecture; o.Base != "scratch" && a != "" && a != o.Arch {
		return nil, nil, fmt.Errorf("base image is %s/%s, want %s/%s", baseCfg.OS, a, o.OS, o.Arch)
	}
	files, missing, err := filesFor(o.Kind, o.Sources)
	if err != nil {
		return nil, nil, err
	}
	layerTar, err := layerTarball(o.Kind.Dir, files, o.Created)
	if err != nil {
		return nil, nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	})
	if err != nil {
		return nil, nil, err
	}
	var names []string
	for _, f := range files {
		names = append(names, path.Base(f.Path))
	}
	img, err := mutate.Append(base, mutate.Addendum{
		Layer: layer,
		History: v1.History{
			Created:   v1.Time{Time: o.Created},
			CreatedBy: fmt.Sprintf("build-image: COPY %s %s/", strings.Join(names, " "), o.Kind.Dir),
			Comment:   "assembled without a container engine by cmd/tools/build-image",
		},
	})
	if err != nil {
		return nil, nil, err
	}

	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = o.OS, o.Arch
	cfg.Created = v1.Time{Time: o.Created}
	cfg.Config.WorkingDir = o.Kind.Dir
	cfg.Config.Entrypoint = o.Kind.Entrypoint
	cfg.Config.Cmd = o.Kind.Cmd
	cfg.Config.Env = withPath(cfg.Config.Env)
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		return nil, nil, err
	}
	return img, missing, nil
}

func loadBase(base string) (v1.Image, error) {
	if base == "scratch" {
		return empty.Image, nil
	}
	img, err := tarball.ImageFromPath(base, nil)
	if err != nil {
		return nil, fmt.Errorf("base image %s: %w", base, err)
	}
	return img, nil
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

// layerTarball writes dir and files as an uncompressed tar, root-owned,
// with fixed times and the modes of the layout.
func layerTarball(dir string, files []file, created time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	hdr := func(name string, typ byte, mode, size int64) *tar.Header {
		return &tar.Header{
			Typeflag: typ, Name: name, Mode: mode, Size: size,
			Uid: 0, Gid: 0, Uname: "root", Gname: "root",
			ModTime: created, Format: tar.FormatPAX,
		}
	}
	// Parent directories, outermost first ("/app" has one).
	var parents []string
	for d := strings.Trim(dir, "/"); d != "." && d != ""; d = path.Dir(d) {
		parents = append([]string{d + "/"}, parents...)
	}
	for _, p := range parents {
		if err := tw.WriteHeader(hdr(p, tar.TypeDir, modeDir, 0)); err != nil {
			return nil, err
		}
	}
	for _, f := range files {
		data, err := os.ReadFile(f.Src)
		if err != nil {
			return nil, err
		}
		if err := tw.WriteHeader(hdr(strings.TrimPrefix(f.Path, "/"), tar.TypeReg, f.Mode, int64(len(data)))); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
