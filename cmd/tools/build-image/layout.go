package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// Modes of the files placed in the images.
const (
	modeBinary = 0o755
	modeData   = 0o644
	modeDir    = 0o755
)

// defaultPath is the PATH given to an image whose base sets none.
const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// file is one file of the image layer.
type file struct {
	Path string // inside the image, absolute
	Src  string // on the build machine
	Mode int64
}

// kind describes one of the two images.
type kind struct {
	Name       string
	Dir        string // the image's WORKDIR
	Entrypoint []string
	Cmd        []string
	DefaultTag string
	// DefaultBase is upstream's base for this image, pulled by reference.
	DefaultBase string
}

var kinds = map[string]kind{
	// aws-node's main container (Dockerfile.release).
	"release": {Name: "release", Dir: "/app", Entrypoint: []string{"/app/aws-vpc-cni"}, DefaultTag: "amazon/amazon-k8s-cni:dev", DefaultBase: defaultReleaseBase},
	// The init container (Dockerfile.init).
	"init": {Name: "init", Dir: "/init", Cmd: []string{"/init/aws-vpc-cni-init"}, DefaultTag: "amazon/amazon-k8s-cni-init:dev", DefaultBase: defaultInitBase},
}

// sources are where the files come from.
type sources struct {
	Binaries string // build output (make build)
	Misc     string // misc/ (conflist template, max-pods table)
	Plugins  string // init only: core CNI plugins and friends, every regular file copied ("" for none)
	// Optional names (file names inside the image) that may be missing;
	// they are then left out with a warning.
	Optional map[string]bool
}

// releaseFiles are the files of /app, as upstream's image has them.
func releaseFiles(s sources) []file {
	return []file{
		{"/app/aws-vpc-cni", filepath.Join(s.Binaries, "aws-vpc-cni"), modeBinary},
		{"/app/aws-k8s-agent", filepath.Join(s.Binaries, "aws-k8s-agent"), modeBinary},
		{"/app/aws-cni", filepath.Join(s.Binaries, "aws-cni"), modeBinary},
		{"/app/egress-cni", filepath.Join(s.Binaries, "egress-cni"), modeBinary},
		{"/app/grpc-health-probe", filepath.Join(s.Binaries, "grpc-health-probe"), modeBinary},
		{"/app/10-aws.conflist", filepath.Join(s.Misc, "10-aws.conflist"), modeData},
		{"/app/eni-max-pods.txt", filepath.Join(s.Misc, "eni-max-pods.txt"), modeData},
	}
}

// initFiles are the files of /init: the init binary and every regular file
// of the plugins directory (binaries keep 0755, anything not executable,
// such as LICENSE, gets 0644).
func initFiles(s sources) ([]file, error) {
	files := []file{{"/init/aws-vpc-cni-init", filepath.Join(s.Binaries, "aws-vpc-cni-init"), modeBinary}}
	if s.Plugins == "" {
		return files, nil
	}
	entries, err := os.ReadDir(s.Plugins)
	if err != nil {
		return nil, fmt.Errorf("plugins: %w", err)
	}
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() && e.Name() != "aws-vpc-cni-init" {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	for _, n := range names {
		src := filepath.Join(s.Plugins, n)
		st, err := os.Stat(src)
		if err != nil {
			return nil, err
		}
		mode := int64(modeData)
		if st.Mode().Perm()&0o111 != 0 {
			mode = modeBinary
		}
		files = append(files, file{"/init/" + n, src, mode})
	}
	return files, nil
}

// corePlugins are the containernetworking/plugins binaries upstream's
// init image carries (every plugin its build_linux.sh builds: meta, main
// and ipam, without windows). `make plugins` builds them from the module
// version pinned in go.mod (the tool block).
var corePlugins = []string{
	"bandwidth", "firewall", "portmap", "sbr", "tuning", "vrf",
	"bridge", "dummy", "host-device", "ipvlan", "loopback", "macvlan", "ptp", "tap", "vlan",
	"dhcp", "host-local", "static",
}

// supportScript is the node log collector the init image copies to the
// host next to the plugins, as upstream's does (scripts/aws-cni-support.sh).
const supportScript = "aws-cni-support.sh"

// requiredFiles are the files -check demands in an image of kind k.
func requiredFiles(k kind) []file {
	switch k.Name {
	case "release":
		return releaseFiles(sources{})
	case "init":
		files := []file{
			{Path: "/init/aws-vpc-cni-init", Mode: modeBinary},
			{Path: "/init/LICENSE", Mode: modeData},
			{Path: "/init/" + supportScript, Mode: modeBinary},
		}
		for _, p := range corePlugins {
			files = append(files, file{Path: "/init/" + p, Mode: modeBinary})
		}
		return files
	}
	return nil
}

// filesFor resolves the layout of k, dropping missing optional files (and
// reporting them) and failing on any other missing file.
func filesFor(k kind, s sources) (files []file, missing []string, err error) {
	var all []file
	switch k.Name {
	case "release":
		all = releaseFiles(s)
	case "init":
		if all, err = initFiles(s); err != nil {
			return nil, nil, err
		}
	default:
		return nil, nil, fmt.Errorf("unknown image kind %q", k.Name)
	}
	for _, f := range all {
		st, err := os.Stat(f.Src)
		switch {
		case err == nil && !st.Mode().IsRegular():
			return nil, nil, fmt.Errorf("%s: not a regular file", f.Src)
		case err == nil:
			files = append(files, f)
		case os.IsNotExist(err) && s.Optional[filepath.Base(f.Path)]:
			missing = append(missing, f.Path)
		default:
			return nil, nil, fmt.Errorf("%s (for %s): %w", f.Src, f.Path, err)
		}
	}
	return files, missing, nil
}
