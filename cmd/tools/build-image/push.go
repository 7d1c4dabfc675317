package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// initRefFor is the init image's reference next to a release reference:
// the repository with "-init" appended, the same tag or digest-less tag
// (ghcr.io/o/amazon-k8s-cni:v1 -> ghcr.io/o/amazon-k8s-cni-init:v1), as
// upstream pairs amazon-k8s-cni with amazon-k8s-cni-init.
func initRefFor(release string) (name.Reference, error) {
	ref, err := name.NewTag(release)
	if err != nil {
		return nil, fmt.Errorf("release image %q: %w (a tag is needed to name the init image)", release, err)
	}
	repo := ref.Context().Name()
	if strings.HasSuffix(repo, "-init") {
		return nil, fmt.Errorf("release image %q already names an -init repository; pass the init image explicitly", release)
	}
	return name.NewTag(repo + "-init:" + ref.TagStr())
}

// push uploads img to ref with the credentials of authn.DefaultKeychain:
// the docker config ($DOCKER_CONFIG or ~/.docker/config.json, its auths
// and credHelpers, e.g. docker-credential-ecr-login for ECR, which reads
// the usual AWS environment).
func push(ctx context.Context, img v1.Image, ref name.Reference) error {
	if err := remote.Write(ref, img,
		remote.WithContext(ctx),
		remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return fmt.Errorf("push %s: %w", ref, err)
	}
	return nil
}
