// Command build-image assembles the aws-node images as OCI/Docker image
// tarballs (the `docker save` format, loadable with `docker load` or
// `ctr images import`) without a container engine, from the build output
// and misc/. The result matches scripts/dockerfiles/Dockerfile.release
// (-kind release: /app/{aws-vpc-cni, aws-k8s-agent, aws-cni,
// grpc-health-probe, 10-aws.conflist, eni-max-pods.txt}, WORKDIR /app,
// ENTRYPOINT ["/app/aws-vpc-cni"]) or Dockerfile.init (-kind init:
// /init/aws-vpc-cni-init plus every regular file of -plugins, WORKDIR
// /init, CMD ["/init/aws-vpc-cni-init"]). Files are root-owned, binaries
// 0755, data 0644; the platform is linux/<-arch>.
//
// It runs no commands inside the image, so the Dockerfile's
// `update-alternatives --set iptables /usr/sbin/iptables-wrapper` has no
// counterpart here: use a base that already selects the iptables backend.
//
//	build-image -base scratch -binaries build -misc misc -out build/aws-node-image.tar
//	build-image -check build/aws-node-image.tar
//
// It never imports pkg/ipamd/...: it packages binaries already built.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("build-image", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kindName := fs.String("kind", "release", "image to build: release (aws-node) or init (aws-vpc-cni-init)")
	base := fs.String("base", "scratch", `base image: "scratch" or a docker-save tarball holding one image`)
	out := fs.String("out", "", "output tarball (required unless -check)")
	binaries := fs.String("binaries", "build", "directory with the built binaries")
	misc := fs.String("misc", "misc", "directory with 10-aws.conflist and eni-max-pods.txt")
	plugins := fs.String("plugins", "", "init only: directory whose regular files (core CNI plugins, LICENSE, ...) go into /init")
	tag := fs.String("tag", "", "image reference recorded in the tarball (default per kind)")
	arch := fs.String("arch", "amd64", "image architecture (the binaries must be built for it)")
	optional := fs.String("optional", "", "comma-separated image file names that may be missing (left out with a warning)")
	check := fs.String("check", "", "verify an image tarball built by this tool against the -kind layout and exit")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	k, ok := kinds[*kindName]
	if !ok || fs.NArg() > 0 {
		fmt.Fprintf(stderr, "unknown -kind %q or extra arguments %q\n", *kindName, fs.Args())
		return 2
	}
	opt := map[string]bool{}
	for _, n := range strings.Split(*optional, ",") {
		if n = strings.TrimSpace(n); n != "" {
			opt[n] = true
		}
	}
	if *check != "" {
		img, err := tarball.ImageFromPath(*check, nil)
		if err != nil {
			fmt.Fprintln(stderr, "error:", err)
			return 1
		}
		listing, err := checkImage(img, k, *arch, opt)
		fmt.Fprintln(stdout, listing)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		fmt.Fprintf(stdout, "%s: %s image layout ok\n", *check, k.Name)
		return 0
	}
	if *out == "" {
		fmt.Fprintln(stderr, "-out is required")
		return 2
	}
	if *tag == "" {
		*tag = k.DefaultTag
	}
	ref, err := name.NewTag(*tag)
	if err != nil {
		fmt.Fprintf(stderr, "bad -tag: %v\n", err)
		return 2
	}
	created, err := sourceDateEpoch()
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	img, missing, err := build(buildOptions{
		Kind: k, Base: *base, OS: "linux", Arch: *arch, Created: created,
		Sources: sources{Binaries: *binaries, Misc: *misc, Plugins: *plugins, Optional: opt},
	})
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	for _, m := range missing {
		fmt.Fprintf(stderr, "WARNING: %s left out of the image (not built yet); the image is not usable on a node without it\n", m)
	}
	if err := tarball.WriteToFile(*out, ref, img); err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	d, err := img.Digest()
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	fmt.Fprintf(stdout, "wrote %s (%s, %s)\n", *out, ref, d)
	return 0
}

// sourceDateEpoch is the image's creation time: SOURCE_DATE_EPOCH if set,
// else the Unix epoch, so rebuilding the same inputs gives the same digest.
func sourceDateEpoch() (time.Time, error) {
	v := os.Getenv("SOURCE_DATE_EPOCH")
	if v == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH %q: %w", v, err)
	}
	return time.Unix(n, 0).UTC(), nil
}
