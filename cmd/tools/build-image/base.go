package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Upstream's bases (facts 1.1): the release image runs on the eks-distro
// minimal base with iptables, the init image on the glibc one.
const (
	defaultReleaseBase = "public.ecr.aws/eks-distro-build-tooling/eks-distro-minimal-base-iptables:latest-al23"
	defaultInitBase    = "public.ecr.aws/eks-distro-build-tooling/eks-distro-minimal-base-glibc:latest-al23"
)

// baseSource says where a base image came from; anything but a registry
// pull is for offline tests and marks the image not deployable.
type baseSource int

const (
	baseScratch baseSource = iota
	baseTarball
	baseRegistry
)

// baseImage is the loaded base and a description of it for history,
// labels and messages.
type baseImage struct {
	Image  v1.Image
	Source baseSource
	Name   string
}

// notDeployable is the reason an image on this base must not reach a
// node, or "" for a registry base.
func (b baseImage) notDeployable() string {
	switch b.Source {
	case baseScratch:
		return "built FROM scratch (offline test build): none of the base image's files (iptables, libc, update-alternatives)"
	case baseTarball:
		return fmt.Sprintf("base read from the local tarball %s (offline test build), not pulled from a registry", b.Name)
	}
	return ""
}

// loadBase resolves -base: "scratch", an existing file (a docker-save
// tarball holding one image), or an image reference pulled from its
// registry for linux/arch with the credentials of authn.DefaultKeychain
// (docker config, credential helpers such as docker-credential-ecr-login).
func loadBase(ctx context.Context, base, arch string) (baseImage, error) {
	if base == "scratch" {
		return baseImage{Image: empty.Image, Source: baseScratch, Name: "scratch"}, nil
	}
	if st, err := os.Stat(base); err == nil && !st.IsDir() {
		img, err := tarball.ImageFromPath(base, nil)
		if err != nil {
			return baseImage{}, fmt.Errorf("base image tarball %s: %w", base, err)
		}
		return baseImage{Image: img, Source: baseTarball, Name: base}, nil
	}
	if strings.HasSuffix(base, ".tar") || strings.HasPrefix(base, "/") || strings.HasPrefix(base, ".") {
		return baseImage{}, fmt.Errorf("base image tarball %s: no such file", base)
	}
	ref, err := name.ParseReference(base)
	if err != nil {
		return baseImage{}, fmt.Errorf("base image %q is neither scratch, a tarball nor an image reference: %w", base, err)
	}
	img, err := remote.Image(ref,
		remote.WithContext(ctx),
		remote.WithAuthFromKeychain(authn.DefaultKeychain),
		remote.WithPlatform(v1.Platform{OS: "linux", Architecture: arch}))
	if err == nil {
		// remote.Image is lazy: fetch the config now so an unreachable
		// registry fails here, with the hint below.
		_, err = img.ConfigFile()
	}
	if err != nil {
		return baseImage{}, &pullError{ref: ref.String(), err: err}
	}
	return baseImage{Image: img, Source: baseRegistry, Name: ref.String()}, nil
}

// pullError is a base that could not be pulled; the message tells an
// offline user what to pass instead.
type pullError struct {
	ref string
	err error
}

func (e *pullError) Error() string {
	return fmt.Sprintf("pull base image %s: %v\n"+
		"  offline or without access to the registry? pass IMAGE_BASE=<docker-save tarball of the base> "+
		"(or IMAGE_BASE=scratch for a test image; both are marked not deployable)", e.ref, e.err)
}

func (e *pullError) Unwrap() error { return e.err }
