// Command build-image assembles the aws-node images as OCI/Docker image
// tarballs (the `docker save` format, loadable with `docker load` or
// `ctr images import`) without a container engine, checks them, and
// pushes them to a registry. The result matches
// scripts/dockerfiles/Dockerfile.release (-kind release: /app/{aws-vpc-cni,
// aws-k8s-agent, aws-cni, egress-cni, grpc-health-probe, 10-aws.conflist,
// eni-max-pods.txt}, WORKDIR /app, ENTRYPOINT ["/app/aws-vpc-cni"]) or
// Dockerfile.init (-kind init: /init/aws-vpc-cni-init plus every regular
// file of -plugins: the core CNI plugins, their LICENSE and
// aws-cni-support.sh; WORKDIR /init, CMD ["/init/aws-vpc-cni-init"]).
// Files are root-owned, binaries 0755, data 0644; the platform is
// linux/<-arch>.
//
// The base is by default upstream's, pulled by reference with
// go-containerregistry: the eks-distro minimal iptables base for release,
// the glibc one for init. Upstream's `RUN update-alternatives --set
// iptables /usr/sbin/iptables-wrapper` runs nothing here: the tool reads
// the base's alternatives admin file and writes the links that command
// leaves behind as a layer of their own. "scratch" or a local tarball
// still work for offline tests; such images carry the
// com.github.aws.amazon-vpc-cni-k8s.not-deployable label, a warning, and
// -push refuses them unless -allow-not-deployable.
//
//	build-image -binaries build -misc misc -out build/aws-node-image.tar
//	build-image -base scratch -binaries build -misc misc -out build/test-image.tar
//	build-image -check build/aws-node-image.tar
//	build-image -push build/aws-node-image.tar -to 111122223333.dkr.ecr.eu-west-1.amazonaws.com/amazon-k8s-cni:v1
//	build-image -kind init -push build/aws-node-init-image.tar -to <the release reference above>
//
// It never imports pkg/ipamd/...: it packages binaries already built.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// flags are the command line.
type flags struct {
	kind, base, out, binaries, misc, plugins, tag, arch, optional string
	alternative                                                   string
	check, push, to, initTo                                       string
	allowNoIPTables, allowNotDeployable                           bool
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var f flags
	fs := flag.NewFlagSet("build-image", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.kind, "kind", "release", "image to build: release (aws-node) or init (aws-vpc-cni-init)")
	fs.StringVar(&f.base, "base", "", `base image: an image reference pulled from its registry (default: upstream's eks-distro base of the kind), `+
		`a docker-save tarball, or "scratch"; the last two are for offline tests and mark the image not deployable`)
	fs.StringVar(&f.out, "out", "", "output tarball (required to build)")
	fs.StringVar(&f.binaries, "binaries", "build", "directory with the built binaries")
	fs.StringVar(&f.misc, "misc", "misc", "directory with 10-aws.conflist and eni-max-pods.txt")
	fs.StringVar(&f.plugins, "plugins", "", "init only: directory whose regular files (core CNI plugins, LICENSE, aws-cni-support.sh) go into /init")
	fs.StringVar(&f.tag, "tag", "", "image reference recorded in the tarball (default per kind)")
	fs.StringVar(&f.arch, "arch", "amd64", "image architecture (the binaries must be built for it)")
	fs.StringVar(&f.optional, "optional", "", "comma-separated image file names that may be missing (left out with a warning)")
	fs.StringVar(&f.alternative, "iptables-alternative", "/usr/sbin/iptables-wrapper",
		`release only: the iptables alternative to select in the base, as upstream's Dockerfile does; "" selects none`)
	fs.StringVar(&f.check, "check", "", "verify an image tarball built by this tool against the -kind layout and exit")
	fs.BoolVar(&f.allowNoIPTables, "allow-no-iptables", false, "-check/-push: accept a release image without working iptables and ip6tables (test images)")
	fs.StringVar(&f.push, "push", "", "push this image tarball (after the -check of its -kind) to -to and exit")
	fs.StringVar(&f.to, "to", "", "the release image reference, e.g. <registry>/amazon-k8s-cni:<tag>: where -push sends it, and the -tag default")
	fs.StringVar(&f.initTo, "init-to", "", "-kind init: the init image reference (default: -to's repository with -init appended, same tag)")
	fs.BoolVar(&f.allowNotDeployable, "allow-not-deployable", false, "-push: push an image marked not deployable (scratch or tarball base)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	k, ok := kinds[f.kind]
	if !ok || fs.NArg() > 0 {
		fmt.Fprintf(stderr, "unknown -kind %q or extra arguments %q\n", f.kind, fs.Args())
		return 2
	}
	opt := map[string]bool{}
	for _, n := range strings.Split(f.optional, ",") {
		if n = strings.TrimSpace(n); n != "" {
			opt[n] = true
		}
	}
	co := checkOptions{Optional: opt, AllowNoIPTables: f.allowNoIPTables}
	switch {
	case f.check != "":
		if _, ok := checkTarball(f.check, k, f.arch, co, stdout, stderr); !ok {
			return 1
		}
		return 0
	case f.push != "":
		return runPush(ctx, f, k, co, stdout, stderr)
	}
	return runBuild(ctx, f, k, opt, stdout, stderr)
}

// target is the image reference of kind k: -to for release; for init
// -init-to, else -to's repository with -init appended.
func target(f flags, k kind) (name.Reference, error) {
	switch {
	case k.Name == "init" && f.initTo != "":
		return name.ParseReference(f.initTo)
	case k.Name == "init":
		return initRefFor(f.to)
	}
	return name.ParseReference(f.to)
}

// checkTarball loads and checks one image tarball, printing the listing,
// warnings and verdict.
func checkTarball(p string, k kind, arch string, co checkOptions, stdout, stderr io.Writer) (v1.Image, bool) {
	img, err := tarball.ImageFromPath(p, nil)
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return nil, false
	}
	listing, warnings, err := checkImage(img, k, arch, co)
	fmt.Fprintln(stdout, listing)
	for _, w := range warnings {
		fmt.Fprintln(stderr, "WARNING:", w)
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return nil, false
	}
	fmt.Fprintf(stdout, "%s: %s image layout ok\n", p, k.Name)
	return img, true
}

func runPush(ctx context.Context, f flags, k kind, co checkOptions, stdout, stderr io.Writer) int {
	if f.to == "" {
		fmt.Fprintln(stderr, "-push needs -to <registry>/<repository>:<tag>")
		return 2
	}
	ref, err := target(f, k)
	if err != nil {
		fmt.Fprintf(stderr, "bad image reference: %v\n", err)
		return 2
	}
	img, ok := checkTarball(f.push, k, f.arch, co, stdout, stderr)
	if !ok {
		fmt.Fprintf(stderr, "not pushing %s\n", f.push)
		return 1
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	if r := cfg.Config.Labels[labelNotDeployable]; r != "" && !f.allowNotDeployable {
		fmt.Fprintf(stderr, "refusing to push %s: it is marked not deployable (%s); rebuild on the registry base (make image without IMAGE_BASE), or pass -allow-not-deployable\n", f.push, r)
		return 1
	}
	if err := push(ctx, img, ref); err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	d, err := img.Digest()
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	fmt.Fprintf(stdout, "pushed %s to %s@%s\n", f.push, ref, d)
	return 0
}

func runBuild(ctx context.Context, f flags, k kind, opt map[string]bool, stdout, stderr io.Writer) int {
	if f.out == "" {
		fmt.Fprintln(stderr, "-out is required")
		return 2
	}
	if f.tag == "" && f.to != "" {
		ref, err := target(f, k)
		if err != nil {
			fmt.Fprintf(stderr, "bad image reference: %v\n", err)
			return 2
		}
		f.tag = ref.Name()
	}
	if f.tag == "" {
		f.tag = k.DefaultTag
	}
	if f.base == "" {
		f.base = k.DefaultBase
	}
	ref, err := name.NewTag(f.tag)
	if err != nil {
		fmt.Fprintf(stderr, "bad -tag: %v\n", err)
		return 2
	}
	created, err := sourceDateEpoch()
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	res, err := build(ctx, buildOptions{
		Kind: k, Base: f.base, OS: "linux", Arch: f.arch, Created: created, Alternative: f.alternative,
		Sources: sources{Binaries: f.binaries, Misc: f.misc, Plugins: f.plugins, Optional: opt},
	})
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	for _, m := range res.Missing {
		fmt.Fprintf(stderr, "WARNING: %s left out of the image (not built yet); the image is not usable on a node without it\n", m)
	}
	if res.NotDeployable != "" {
		fmt.Fprintf(stderr, "WARNING: %s is NOT DEPLOYABLE: %s (label %s)\n", f.out, res.NotDeployable, labelNotDeployable)
	}
	if err := tarball.WriteToFile(f.out, ref, res.Image); err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	d, err := res.Image.Digest()
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	fmt.Fprintf(stdout, "wrote %s (%s, %s, base %s)\n", f.out, ref, d, f.base)
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
