package main

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var releaseBinaries = []string{"aws-vpc-cni", "aws-k8s-agent", "aws-cni", "egress-cni", "grpc-health-probe"}

// inputs writes fake build output and misc files; source modes are odd on
// purpose, the image must normalise them.
func inputs(t *testing.T) (bin, misc string) {
	root := t.TempDir()
	bin, misc = filepath.Join(root, "build"), filepath.Join(root, "misc")
	require.NoError(t, os.MkdirAll(bin, 0o755))
	require.NoError(t, os.MkdirAll(misc, 0o755))
	for _, b := range append(releaseBinaries, "aws-vpc-cni-init") {
		write(t, filepath.Join(bin, b), "ELF "+b, 0o700)
	}
	write(t, filepath.Join(misc, "10-aws.conflist"), `{"cniVersion":"0.4.0"}`, 0o600)
	write(t, filepath.Join(misc, "eni-max-pods.txt"), "m5.large 29\n", 0o664)
	return bin, misc
}

func write(t *testing.T, p, content string, mode os.FileMode) {
	require.NoError(t, os.WriteFile(p, []byte(content), mode))
	require.NoError(t, os.Chmod(p, mode))
}

func runTool(t *testing.T, args ...string) (int, string) {
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, &out, &errOut)
	return code, out.String() + errOut.String()
}

// entry is one tar entry of a layer.
type entry struct {
	typ      byte
	mode     int64
	uid, gid int
	uname    string
	body     string
}

func layerEntries(t *testing.T, l v1.Layer) map[string]entry {
	rc, err := l.Uncompressed()
	require.NoError(t, err)
	defer rc.Close()
	out := map[string]entry{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		require.NoError(t, err)
		b, err := io.ReadAll(tr)
		require.NoError(t, err)
		out[h.Name] = entry{typ: h.Typeflag, mode: h.Mode, uid: h.Uid, gid: h.Gid, uname: h.Uname, body: string(b)}
	}
}

func TestReleaseImageFromScratch(t *testing.T) {
	bin, misc := inputs(t)
	out := filepath.Join(t.TempDir(), "aws-node-image.tar")
	code, logs := runTool(t, "-base", "scratch", "-out", out, "-binaries", bin, "-misc", misc, "-tag", "example.com/aws-node:test")
	require.Equal(t, 0, code, logs)

	tag, err := name.NewTag("example.com/aws-node:test")
	require.NoError(t, err)
	img, err := tarball.ImageFromPath(out, &tag)
	require.NoError(t, err)

	layers, err := img.Layers()
	require.NoError(t, err)
	require.Len(t, layers, 1, "scratch base plus one layer")
	got := layerEntries(t, layers[0])
	want := map[string]entry{"app/": {typ: tar.TypeDir, mode: 0o755, uname: "root"}}
	for _, b := range releaseBinaries {
		want["app/"+b] = entry{typ: tar.TypeReg, mode: 0o755, uname: "root", body: "ELF " + b}
	}
	want["app/10-aws.conflist"] = entry{typ: tar.TypeReg, mode: 0o644, uname: "root", body: `{"cniVersion":"0.4.0"}`}
	want["app/eni-max-pods.txt"] = entry{typ: tar.TypeReg, mode: 0o644, uname: "root", body: "m5.large 29\n"}
	assert.Equal(t, want, got)

	cfg, err := img.ConfigFile()
	require.NoError(t, err)
	assert.Equal(t, "linux", cfg.OS)
	assert.Equal(t, "amd64", cfg.Architecture)
	assert.Equal(t, []string{"/app/aws-vpc-cni"}, cfg.Config.Entrypoint)
	assert.Empty(t, cfg.Config.Cmd)
	assert.Equal(t, "/app", cfg.Config.WorkingDir)
	assert.Equal(t, []string{defaultPath}, cfg.Config.Env)
	require.Len(t, cfg.History, 1)
	assert.Contains(t, cfg.History[0].CreatedBy, "/app/")
	assert.Contains(t, cfg.Config.Labels[labelNotDeployable], "scratch", "a scratch image is marked")

	// The tool's own check refuses it as a release image (no iptables)
	// unless told it is a test image, and the same inputs give the same
	// image.
	code, logs = runTool(t, "-check", out)
	assert.Equal(t, 1, code, logs)
	assert.Contains(t, logs, "iptables: not found in PATH")
	assert.Contains(t, logs, "ip6tables: not found in PATH")
	assert.Contains(t, logs, "WARNING: image is marked not deployable")
	code, logs = runTool(t, "-check", out, "-allow-no-iptables")
	assert.Equal(t, 0, code, logs)
	assert.Contains(t, logs, "0755 0:0")
	out2 := filepath.Join(t.TempDir(), "again.tar")
	code, logs = runTool(t, "-base", "scratch", "-out", out2, "-binaries", bin, "-misc", misc, "-tag", "example.com/aws-node:test")
	require.Equal(t, 0, code, logs)
	img2, err := tarball.ImageFromPath(out2, nil)
	require.NoError(t, err)
	d1, err := img.Digest()
	require.NoError(t, err)
	d2, err := img2.Digest()
	require.NoError(t, err)
	assert.Equal(t, d1, d2, "reproducible")
}

func TestOptionalAndMissingFiles(t *testing.T) {
	bin, misc := inputs(t)
	require.NoError(t, os.Remove(filepath.Join(bin, "aws-cni")))
	out := filepath.Join(t.TempDir(), "img.tar")

	code, logs := runTool(t, "-base", "scratch", "-out", out, "-binaries", bin, "-misc", misc)
	assert.Equal(t, 1, code)
	assert.Contains(t, logs, "aws-cni")

	code, logs = runTool(t, "-base", "scratch", "-out", out, "-binaries", bin, "-misc", misc, "-optional", "aws-cni,10-aws.conflist")
	require.Equal(t, 0, code, logs)
	assert.Contains(t, logs, "WARNING: /app/aws-cni left out")
	img, err := tarball.ImageFromPath(out, nil)
	require.NoError(t, err)
	files, err := listFiles(img)
	require.NoError(t, err)
	assert.NotContains(t, files, "/app/aws-cni")
	assert.Contains(t, files, "/app/10-aws.conflist")

	code, logs = runTool(t, "-check", out, "-allow-no-iptables")
	assert.Equal(t, 1, code)
	assert.Contains(t, logs, "missing /app/aws-cni")
	code, logs = runTool(t, "-check", out, "-optional", "aws-cni", "-allow-no-iptables")
	assert.Equal(t, 0, code, logs)
}

// adminFile is a Red Hat style alternatives admin file like the one the
// Amazon Linux 2023 iptables packages and iptables-wrapper leave: nft is
// selected (auto), the wrapper is registered with all slaves.
const adminFile = `auto
/usr/sbin/iptables
ip6tables
/usr/sbin/ip6tables
iptables-save
/usr/sbin/iptables-save

/usr/sbin/iptables-nft
20
/usr/sbin/ip6tables-nft
/usr/sbin/iptables-nft-save
/usr/sbin/iptables-wrapper
100
/usr/sbin/iptables-wrapper
/usr/sbin/iptables-wrapper
`

// stand-in is the tiny iptables every base gets: a script that names
// itself.
const standIn = "#!/bin/sh\necho \"$0 $*\"\n"

// baseImg is a one-layer base like the eks-distro iptables one, in
// miniature: /sbin a link to usr/sbin, iptables and ip6tables reached
// through /etc/alternatives (nft selected), the wrapper installed and
// registered, its own environment.
func baseImg(t *testing.T, arch string) v1.Image {
	reg := func(p string) layerEntry {
		return layerEntry{Path: p, Type: tar.TypeReg, Mode: 0o755, Data: []byte(standIn)}
	}
	ln := func(p, target string) layerEntry {
		return layerEntry{Path: p, Type: tar.TypeSymlink, Mode: 0o777, Link: target}
	}
	data, err := layerTarball(withParents([]layerEntry{
		ln("/sbin", "usr/sbin"),
		reg("/usr/sbin/iptables-nft"), reg("/usr/sbin/ip6tables-nft"), reg("/usr/sbin/iptables-nft-save"),
		reg("/usr/sbin/iptables-legacy"), reg("/usr/sbin/iptables-wrapper"),
		ln("/usr/sbin/iptables", "/etc/alternatives/iptables"),
		ln("/usr/sbin/ip6tables", "/etc/alternatives/ip6tables"),
		ln("/usr/sbin/iptables-save", "/etc/alternatives/iptables-save"),
		ln("/etc/alternatives/iptables", "/usr/sbin/iptables-nft"),
		ln("/etc/alternatives/ip6tables", "/usr/sbin/ip6tables-nft"),
		ln("/etc/alternatives/iptables-save", "/usr/sbin/iptables-nft-save"),
		{Path: "/var/lib/alternatives/iptables", Type: tar.TypeReg, Mode: 0o644, Data: []byte(adminFile)},
	}), time.Unix(0, 0))
	require.NoError(t, err)
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	})
	require.NoError(t, err)
	img, err := mutate.AppendLayers(empty.Image, layer)
	require.NoError(t, err)
	cfg, err := img.ConfigFile()
	require.NoError(t, err)
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", arch
	cfg.Config.Env = []string{"PATH=/sbin:/bin", "SSL_CERT_FILE=/etc/ssl/certs/ca-bundle.crt"}
	img, err = mutate.ConfigFile(img, cfg)
	require.NoError(t, err)
	return img
}

// baseTarFile writes baseImg as a docker-save tarball.
func baseTarFile(t *testing.T, arch string) string {
	p := filepath.Join(t.TempDir(), "base.tar")
	tag, err := name.NewTag("example.com/base:1")
	require.NoError(t, err)
	require.NoError(t, tarball.WriteToFile(p, tag, baseImg(t, arch)))
	return p
}

// checkOnBase asserts what an image built on baseImg must hold: the base
// kept, the alternatives layer of `update-alternatives --set iptables
// /usr/sbin/iptables-wrapper`, iptables and ip6tables resolving to the
// wrapper, the base's environment, and a passing -check.
func checkOnBase(t *testing.T, out string) v1.Image {
	img, err := tarball.ImageFromPath(out, nil)
	require.NoError(t, err)
	layers, err := img.Layers()
	require.NoError(t, err)
	require.Len(t, layers, 3, "base, /app, alternatives")
	alt := layerEntries(t, layers[2])
	assert.Equal(t, entry{typ: tar.TypeSymlink, mode: 0o777, uname: "root"}, stripLink(alt["etc/alternatives/iptables"]))
	files, err := listFiles(img)
	require.NoError(t, err)
	assert.Equal(t, "/usr/sbin/iptables-wrapper", files["/etc/alternatives/iptables"].Symlink)
	assert.Equal(t, "/usr/sbin/iptables-wrapper", files["/etc/alternatives/ip6tables"].Symlink)
	assert.Equal(t, "/usr/sbin/iptables-wrapper", files["/etc/alternatives/iptables-save"].Symlink)
	assert.Equal(t, "/etc/alternatives/iptables", files["/usr/sbin/iptables"].Symlink)
	admin, err := readImageFile(img, "/var/lib/alternatives/iptables")
	require.NoError(t, err)
	assert.Equal(t, strings.Replace(adminFile, "auto\n", "manual\n", 1), string(admin), "manual mode, rest unchanged")
	cfg, err := img.ConfigFile()
	require.NoError(t, err)
	for _, prog := range []string{"iptables", "ip6tables"} {
		real, err := lookPath(files, cfg.Config.Env, prog)
		require.NoError(t, err)
		assert.Equal(t, "/usr/sbin/iptables-wrapper", real, prog)
	}
	assert.Equal(t, int64(0o755), files["/app/aws-vpc-cni"].Mode)
	assert.Equal(t, []string{"PATH=/sbin:/bin", "SSL_CERT_FILE=/etc/ssl/certs/ca-bundle.crt"}, cfg.Config.Env, "base env kept")
	assert.Equal(t, []string{"/app/aws-vpc-cni"}, cfg.Config.Entrypoint)
	require.Len(t, cfg.History, 3)
	assert.Contains(t, cfg.History[2].CreatedBy, "update-alternatives --set iptables /usr/sbin/iptables-wrapper")
	code, logs := runTool(t, "-check", out)
	assert.Equal(t, 0, code, logs)
	return img
}

func stripLink(e entry) entry { return entry{typ: e.typ, mode: e.mode, uname: e.uname} }

func TestReleaseImageOnTarballBase(t *testing.T) {
	bin, misc := inputs(t)
	out := filepath.Join(t.TempDir(), "img.tar")
	code, logs := runTool(t, "-base", baseTarFile(t, "amd64"), "-out", out, "-binaries", bin, "-misc", misc)
	require.Equal(t, 0, code, logs)
	assert.Contains(t, logs, "NOT DEPLOYABLE")
	img := checkOnBase(t, out)
	cfg, err := img.ConfigFile()
	require.NoError(t, err)
	assert.Contains(t, cfg.Config.Labels[labelNotDeployable], "local tarball")

	code, logs = runTool(t, "-base", baseTarFile(t, "arm64"), "-out", out, "-binaries", bin, "-misc", misc)
	assert.Equal(t, 1, code)
	assert.Contains(t, logs, "linux/arm64")
	code, logs = runTool(t, "-base", filepath.Join(t.TempDir(), "absent.tar"), "-out", out, "-binaries", bin, "-misc", misc)
	assert.Equal(t, 1, code)
	assert.Contains(t, logs, "no such file")
}

// registry serves go-containerregistry's in-process registry; with user
// set it demands that basic-auth user (password "pw") on every request.
func registry(t *testing.T, user string) string {
	h := ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0)))
	var handler http.Handler = h
	if user != "" {
		handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if u, p, ok := r.BasicAuth(); !ok || u != user || p != "pw" {
				w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			h.ServeHTTP(w, r)
		})
	}
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// dockerConfig points authn.DefaultKeychain at a config holding creds
// for host (none when user is "").
func dockerConfig(t *testing.T, host, user string) {
	dir := t.TempDir()
	cfg := `{}`
	if user != "" {
		auth := base64.StdEncoding.EncodeToString([]byte(user + ":pw"))
		cfg = fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, host, auth)
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o600))
	t.Setenv("DOCKER_CONFIG", dir)
}

func TestReleaseImageOnRegistryBase(t *testing.T) {
	host := registry(t, "puller")
	dockerConfig(t, host, "puller")
	ref, err := name.ParseReference(host + "/eks-distro-build-tooling/eks-distro-minimal-base-iptables:latest-al23")
	require.NoError(t, err)
	require.NoError(t, remote.Write(ref, baseImg(t, "amd64"), remote.WithAuthFromKeychain(authn.DefaultKeychain)))

	bin, misc := inputs(t)
	out := filepath.Join(t.TempDir(), "img.tar")
	code, logs := runTool(t, "-base", ref.String(), "-out", out, "-binaries", bin, "-misc", misc)
	require.Equal(t, 0, code, logs)
	assert.NotContains(t, logs, "NOT DEPLOYABLE")
	img := checkOnBase(t, out)
	cfg, err := img.ConfigFile()
	require.NoError(t, err)
	assert.NotContains(t, cfg.Config.Labels, labelNotDeployable)

	// Without credentials the registry refuses and the message says what
	// to do offline.
	dockerConfig(t, host, "")
	code, logs = runTool(t, "-base", ref.String(), "-out", out, "-binaries", bin, "-misc", misc)
	assert.Equal(t, 1, code)
	assert.Contains(t, logs, "pull base image "+ref.String())
	assert.Contains(t, logs, "IMAGE_BASE=<docker-save tarball")
}

func TestDefaultBaseOffline(t *testing.T) {
	// The default base is upstream's, pulled by reference; point the
	// registry at a closed port to stand for "offline".
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	host := l.Addr().String()
	require.NoError(t, l.Close())
	assert.Equal(t, "public.ecr.aws/eks-distro-build-tooling/eks-distro-minimal-base-iptables:latest-al23", kinds["release"].DefaultBase)
	assert.Equal(t, "public.ecr.aws/eks-distro-build-tooling/eks-distro-minimal-base-glibc:latest-al23", kinds["init"].DefaultBase)
	bin, misc := inputs(t)
	code, logs := runTool(t, "-base", host+"/base:1", "-out", filepath.Join(t.TempDir(), "x.tar"), "-binaries", bin, "-misc", misc)
	assert.Equal(t, 1, code)
	assert.Contains(t, logs, "IMAGE_BASE=scratch")
}

func TestAlternativeMissingFromBase(t *testing.T) {
	bin, misc := inputs(t)
	// A base without the alternatives admin file (not the eks-distro one).
	p := filepath.Join(t.TempDir(), "plain.tar")
	tag, err := name.NewTag("example.com/plain:1")
	require.NoError(t, err)
	img, err := mutate.ConfigFile(empty.Image, &v1.ConfigFile{OS: "linux", Architecture: "amd64"})
	require.NoError(t, err)
	require.NoError(t, tarball.WriteToFile(p, tag, img))
	out := filepath.Join(t.TempDir(), "img.tar")
	code, logs := runTool(t, "-base", p, "-out", out, "-binaries", bin, "-misc", misc)
	assert.Equal(t, 1, code)
	assert.Contains(t, logs, "/var/lib/alternatives/iptables: not in the image")
	assert.Contains(t, logs, "-iptables-alternative=")
	// Skipping the step builds, and the check then finds no iptables.
	code, logs = runTool(t, "-base", p, "-iptables-alternative=", "-out", out, "-binaries", bin, "-misc", misc)
	require.Equal(t, 0, code, logs)
	code, logs = runTool(t, "-check", out)
	assert.Equal(t, 1, code)
	assert.Contains(t, logs, "iptables: not found in PATH")
	// An alternative the base does not register is refused, as
	// update-alternatives would.
	code, logs = runTool(t, "-base", baseTarFile(t, "amd64"), "-iptables-alternative", "/usr/sbin/iptables-legacy", "-out", out, "-binaries", bin, "-misc", misc)
	assert.Equal(t, 1, code)
	assert.Contains(t, logs, "/usr/sbin/iptables-legacy is not one of its alternatives")
}

func TestParseAlternatives(t *testing.T) {
	g, err := parseAlternatives("iptables", []byte(adminFile))
	require.NoError(t, err)
	assert.Equal(t, altGroup{
		Name: "iptables", Mode: "auto", Link: "/usr/sbin/iptables",
		Slaves: []altSlave{{"ip6tables", "/usr/sbin/ip6tables"}, {"iptables-save", "/usr/sbin/iptables-save"}},
		Choices: []altChoice{
			{Target: "/usr/sbin/iptables-nft", Line: "/usr/sbin/iptables-nft", Priority: "20", Slaves: []string{"/usr/sbin/ip6tables-nft", "/usr/sbin/iptables-nft-save"}},
			{Target: "/usr/sbin/iptables-wrapper", Line: "/usr/sbin/iptables-wrapper", Priority: "100", Slaves: []string{"/usr/sbin/iptables-wrapper", "/usr/sbin/iptables-wrapper"}},
		},
	}, g)
	assert.Equal(t, adminFile, string(g.format("auto")), "round trip")

	// A choice without a slave target and a family prefix.
	g, err = parseAlternatives("x", []byte("manual\n/usr/bin/x\nxs\n/usr/bin/xs\n\n@fam@/usr/bin/x-a\n5\n\n"))
	require.NoError(t, err)
	links, admin, err := g.set("/usr/bin/x-a")
	require.NoError(t, err)
	assert.Equal(t, []symlink{{"/usr/bin/x", "/etc/alternatives/x"}, {"/etc/alternatives/x", "/usr/bin/x-a"}}, links, "no link for the empty slave")
	assert.Equal(t, "manual\n/usr/bin/x\nxs\n/usr/bin/xs\n\n@fam@/usr/bin/x-a\n5\n\n", string(admin))

	for _, bad := range []string{
		"",
		"sometimes\n/usr/sbin/iptables\n\n",
		"auto\nrelative\n\n",
		"auto\n/usr/sbin/iptables\nip6tables\n",
		"auto\n/usr/sbin/iptables\nip6tables\nrel\n\n",
		"auto\n/usr/sbin/iptables\n\nrel-target\n10\n",
		"auto\n/usr/sbin/iptables\n\n/usr/sbin/iptables-nft\n",
	} {
		_, err := parseAlternatives("iptables", []byte(bad))
		assert.Error(t, err, "%q", bad)
	}
}

func TestResolve(t *testing.T) {
	files := map[string]fileInfo{
		"/bin":           {Symlink: "usr/bin"},
		"/usr":           {Dir: true},
		"/usr/bin":       {Dir: true},
		"/usr/bin/a":     {Symlink: "../lib/b"},
		"/usr/lib":       {Dir: true},
		"/usr/lib/b":     {Mode: 0o755},
		"/usr/bin/hard":  {Hardlink: "/usr/lib/b"},
		"/usr/bin/loop1": {Symlink: "loop2"},
		"/usr/bin/loop2": {Symlink: "loop1"},
	}
	for _, c := range []struct{ in, want, err string }{
		{"/bin/a", "/usr/lib/b", ""},
		{"/usr/bin/hard", "/usr/lib/b", ""},
		{"/bin/missing", "", "/usr/bin/missing: no such file"},
		{"/bin/loop1", "", "too many levels"},
	} {
		got, _, err := resolve(files, c.in)
		if c.err != "" {
			assert.ErrorContains(t, err, c.err, c.in)
			continue
		}
		require.NoError(t, err, c.in)
		assert.Equal(t, c.want, got, c.in)
	}
}

// The wrapper selects one mode for both families: a base with
// iptables-nft but only ip6tables-legacy cannot serve an IPv6 cluster.
func TestWrapperBackends(t *testing.T) {
	exe := fileInfo{Mode: 0o755}
	for _, c := range []struct {
		name  string
		files []string
		err   string
	}{
		{"nft", []string{"iptables-nft", "ip6tables-nft"}, ""},
		{"legacy", []string{"iptables-legacy", "ip6tables-legacy"}, ""},
		{"mixed", []string{"iptables-nft", "ip6tables-legacy"},
			"missing /usr/sbin/ip6tables-nft; missing /usr/sbin/iptables-legacy"},
		{"IPv4 only", []string{"iptables-nft", "iptables-legacy"},
			"missing /usr/sbin/ip6tables-nft; missing /usr/sbin/ip6tables-legacy"},
		{"none", nil, "missing /usr/sbin/iptables-nft and /usr/sbin/ip6tables-nft"},
	} {
		files := map[string]fileInfo{"/usr": {Dir: true}, "/usr/sbin": {Dir: true}}
		for _, f := range c.files {
			files["/usr/sbin/"+f] = exe
		}
		err := wrapperBackends(files)
		if c.err == "" {
			assert.NoError(t, err, c.name)
			continue
		}
		assert.ErrorContains(t, err, c.err, c.name)
	}
	files := map[string]fileInfo{"/usr": {Dir: true}, "/usr/sbin": {Dir: true},
		"/usr/sbin/iptables-nft": exe, "/usr/sbin/ip6tables-nft": {Mode: 0o644}}
	assert.ErrorContains(t, wrapperBackends(files), "ip6tables-nft", "not executable")
}

func TestInitImage(t *testing.T) {
	bin, _ := inputs(t)
	plugins := t.TempDir()
	for _, p := range corePlugins {
		write(t, filepath.Join(plugins, p), "ELF "+p, 0o750)
	}
	write(t, filepath.Join(plugins, "LICENSE"), "Apache-2.0", 0o600)
	write(t, filepath.Join(plugins, supportScript), "#!/bin/sh\n", 0o700)
	require.NoError(t, os.Mkdir(filepath.Join(plugins, "sub"), 0o755))
	out := filepath.Join(t.TempDir(), "init.tar")
	code, logs := runTool(t, "-kind", "init", "-base", "scratch", "-out", out, "-binaries", bin, "-plugins", plugins)
	require.Equal(t, 0, code, logs)

	tag, err := name.NewTag("amazon/amazon-k8s-cni-init:dev")
	require.NoError(t, err)
	img, err := tarball.ImageFromPath(out, &tag)
	require.NoError(t, err)
	layers, err := img.Layers()
	require.NoError(t, err)
	require.Len(t, layers, 1, "no alternatives layer in the init image")
	got := layerEntries(t, layers[0])
	want := map[string]entry{
		"init/":                 {typ: tar.TypeDir, mode: 0o755, uname: "root"},
		"init/aws-vpc-cni-init": {typ: tar.TypeReg, mode: 0o755, uname: "root", body: "ELF aws-vpc-cni-init"},
		"init/LICENSE":          {typ: tar.TypeReg, mode: 0o644, uname: "root", body: "Apache-2.0"},
		"init/" + supportScript: {typ: tar.TypeReg, mode: 0o755, uname: "root", body: "#!/bin/sh\n"},
	}
	for _, p := range corePlugins {
		want["init/"+p] = entry{typ: tar.TypeReg, mode: 0o755, uname: "root", body: "ELF " + p}
	}
	assert.Equal(t, want, got)
	cfg, err := img.ConfigFile()
	require.NoError(t, err)
	assert.Equal(t, "/init", cfg.Config.WorkingDir)
	assert.Equal(t, []string{"/init/aws-vpc-cni-init"}, cfg.Config.Cmd)
	assert.Empty(t, cfg.Config.Entrypoint)
	assert.Equal(t, "amd64", cfg.Architecture)

	code, logs = runTool(t, "-kind", "init", "-check", out)
	assert.Equal(t, 0, code, logs)
	// Every plugin upstream's init image carries is required.
	require.NoError(t, os.Remove(filepath.Join(plugins, "host-local")))
	code, logs = runTool(t, "-kind", "init", "-base", "scratch", "-out", out, "-binaries", bin, "-plugins", plugins)
	require.Equal(t, 0, code, logs)
	code, logs = runTool(t, "-kind", "init", "-check", out)
	assert.Equal(t, 1, code)
	assert.Contains(t, logs, "missing /init/host-local")
}

func TestPush(t *testing.T) {
	host := registry(t, "pusher")
	dockerConfig(t, host, "pusher")
	bin, misc := inputs(t)
	dir := t.TempDir()
	release, onScratch := filepath.Join(dir, "release.tar"), filepath.Join(dir, "scratch.tar")
	code, logs := runTool(t, "-base", baseTarFile(t, "amd64"), "-out", release, "-binaries", bin, "-misc", misc)
	require.Equal(t, 0, code, logs)
	code, logs = runTool(t, "-base", "scratch", "-out", onScratch, "-binaries", bin, "-misc", misc)
	require.Equal(t, 0, code, logs)

	to := host + "/team/amazon-k8s-cni:v1.23.1-leakfix.0"
	// A not-deployable image is refused, then pushed when allowed.
	code, logs = runTool(t, "-push", release, "-to", to)
	assert.Equal(t, 1, code)
	assert.Contains(t, logs, "refusing to push")
	code, logs = runTool(t, "-push", release, "-to", to, "-allow-not-deployable")
	require.Equal(t, 0, code, logs)
	assert.Contains(t, logs, "pushed "+release)
	// The scratch image fails its check (no iptables) before any upload.
	code, logs = runTool(t, "-push", onScratch, "-to", host+"/team/other:1", "-allow-not-deployable")
	assert.Equal(t, 1, code)
	assert.Contains(t, logs, "not pushing")

	ref, err := name.ParseReference(to)
	require.NoError(t, err)
	got, err := remote.Image(ref, remote.WithAuthFromKeychain(authn.DefaultKeychain))
	require.NoError(t, err)
	local, err := tarball.ImageFromPath(release, nil)
	require.NoError(t, err)
	d1, err := got.Digest()
	require.NoError(t, err)
	d2, err := local.Digest()
	require.NoError(t, err)
	assert.Equal(t, d2, d1, "the registry holds the tarball's image")
	_, err = remote.Image(ref) // no credentials
	assert.Error(t, err, "the registry demands auth, so the push used the keychain")

	// The init image goes next to it, -init appended to the repository.
	plugins := t.TempDir()
	for _, p := range corePlugins {
		write(t, filepath.Join(plugins, p), "ELF", 0o755)
	}
	write(t, filepath.Join(plugins, "LICENSE"), "L", 0o644)
	write(t, filepath.Join(plugins, supportScript), "#!/bin/sh\n", 0o755)
	initTar := filepath.Join(dir, "init.tar")
	code, logs = runTool(t, "-kind", "init", "-base", baseTarFile(t, "amd64"), "-out", initTar, "-binaries", bin, "-plugins", plugins)
	require.Equal(t, 0, code, logs)
	code, logs = runTool(t, "-kind", "init", "-push", initTar, "-to", to, "-allow-not-deployable")
	require.Equal(t, 0, code, logs)
	initRef, err := name.ParseReference(host + "/team/amazon-k8s-cni-init:v1.23.1-leakfix.0")
	require.NoError(t, err)
	_, err = remote.Image(initRef, remote.WithAuthFromKeychain(authn.DefaultKeychain))
	assert.NoError(t, err)

	// Wrong credentials: a clear failure.
	dockerConfig(t, host, "intruder")
	code, logs = runTool(t, "-push", release, "-to", to, "-allow-not-deployable")
	assert.Equal(t, 1, code)
	assert.Contains(t, logs, "push "+to)
}

func TestInitRefFor(t *testing.T) {
	for _, c := range []struct{ in, want, err string }{
		{"ghcr.io/o/amazon-k8s-cni:v1", "ghcr.io/o/amazon-k8s-cni-init:v1", ""},
		{"127.0.0.1:5000/amazon-k8s-cni:dev", "127.0.0.1:5000/amazon-k8s-cni-init:dev", ""},
		{"111122223333.dkr.ecr.eu-west-1.amazonaws.com/cni", "111122223333.dkr.ecr.eu-west-1.amazonaws.com/cni-init:latest", ""},
		{"ghcr.io/o/amazon-k8s-cni-init:v1", "", "already names an -init repository"},
		{"ghcr.io/o/amazon-k8s-cni@sha256:" + strings.Repeat("a", 64), "", "a tag is needed"},
	} {
		got, err := initRefFor(c.in)
		if c.err != "" {
			assert.ErrorContains(t, err, c.err, c.in)
			continue
		}
		require.NoError(t, err, c.in)
		assert.Equal(t, c.want, got.Name(), c.in)
	}
}

func TestCheckCatchesWrongConfig(t *testing.T) {
	bin, misc := inputs(t)
	res, err := build(context.Background(), buildOptions{Kind: kinds["release"], Base: "scratch", OS: "linux", Arch: "amd64",
		Sources: sources{Binaries: bin, Misc: misc}})
	require.NoError(t, err)
	img := res.Image
	allow := checkOptions{AllowNoIPTables: true}
	_, warnings, err := checkImage(img, kinds["release"], "amd64", allow)
	require.NoError(t, err)
	assert.Len(t, warnings, 3, "not deployable, no iptables, no ip6tables")

	cfg, err := img.ConfigFile()
	require.NoError(t, err)
	cfg = cfg.DeepCopy()
	cfg.Config.Entrypoint = []string{"/bin/sh"}
	cfg.Config.WorkingDir = "/"
	cfg.Architecture = "arm64"
	bad, err := mutate.ConfigFile(img, cfg)
	require.NoError(t, err)
	_, _, err = checkImage(bad, kinds["release"], "amd64", allow)
	require.Error(t, err)
	for _, s := range []string{"entrypoint", "working dir", "platform"} {
		assert.Contains(t, err.Error(), s)
	}
	_, _, err = checkImage(img, kinds["init"], "amd64", allow)
	assert.Error(t, err, "a release image is not an init image")
}

func TestBadArguments(t *testing.T) {
	for _, args := range [][]string{
		{},                              // no -out
		{"-kind", "other", "-out", "x"}, // unknown kind
		{"-out", "x", "-tag", "UPPER/Case:tag"},
		{"-out", "x", "extra"},
		{"-bogus"},
	} {
		code, _ := runTool(t, args...)
		assert.Equal(t, 2, code, "%q", args)
	}
	t.Setenv("SOURCE_DATE_EPOCH", "yesterday")
	code, logs := runTool(t, "-out", filepath.Join(t.TempDir(), "x.tar"))
	assert.Equal(t, 2, code)
	assert.Contains(t, logs, "SOURCE_DATE_EPOCH")
}

func TestSourceDateEpoch(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	bin, misc := inputs(t)
	out := filepath.Join(t.TempDir(), "img.tar")
	code, logs := runTool(t, "-base", "scratch", "-out", out, "-binaries", bin, "-misc", misc)
	require.Equal(t, 0, code, logs)
	img, err := tarball.ImageFromPath(out, nil)
	require.NoError(t, err)
	cfg, err := img.ConfigFile()
	require.NoError(t, err)
	assert.Equal(t, int64(1700000000), cfg.Created.Unix())
}

func TestTagFromTo(t *testing.T) {
	bin, _ := inputs(t)
	out := filepath.Join(t.TempDir(), "init.tar")
	code, logs := runTool(t, "-kind", "init", "-base", "scratch", "-out", out, "-binaries", bin, "-to", "ghcr.io/o/amazon-k8s-cni:v2")
	require.Equal(t, 0, code, logs)
	assert.Contains(t, logs, "ghcr.io/o/amazon-k8s-cni-init:v2")
	tag, err := name.NewTag("ghcr.io/o/amazon-k8s-cni-init:v2")
	require.NoError(t, err)
	_, err = tarball.ImageFromPath(out, &tag)
	assert.NoError(t, err, "the tarball records the derived init reference")
	code, logs = runTool(t, "-kind", "init", "-base", "scratch", "-out", out, "-binaries", bin, "-to", "x", "-init-to", "ghcr.io/o/init:v3")
	require.Equal(t, 0, code, logs)
	assert.Contains(t, logs, "ghcr.io/o/init:v3")
}

// The real base is a multi-platform index: the base of -arch is taken.
func TestRegistryBaseIndexPicksArch(t *testing.T) {
	host := registry(t, "")
	dockerConfig(t, host, "")
	idx := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: baseImg(t, "amd64"), Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}},
		mutate.IndexAddendum{Add: baseImg(t, "arm64"), Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64"}}})
	ref, err := name.ParseReference(host + "/base:multi")
	require.NoError(t, err)
	require.NoError(t, remote.WriteIndex(ref, idx))

	bin, misc := inputs(t)
	for _, arch := range []string{"arm64", "amd64"} {
		out := filepath.Join(t.TempDir(), arch+".tar")
		code, logs := runTool(t, "-base", ref.String(), "-arch", arch, "-out", out, "-binaries", bin, "-misc", misc)
		require.Equal(t, 0, code, logs)
		img, err := tarball.ImageFromPath(out, nil)
		require.NoError(t, err)
		cfg, err := img.ConfigFile()
		require.NoError(t, err)
		assert.Equal(t, arch, cfg.Architecture)
		code, logs = runTool(t, "-check", out, "-arch", arch)
		assert.Equal(t, 0, code, logs)
	}
	code, logs := runTool(t, "-base", ref.String(), "-arch", "s390x", "-out", filepath.Join(t.TempDir(), "x.tar"), "-binaries", bin, "-misc", misc)
	assert.Equal(t, 1, code)
	assert.Contains(t, logs, "pull base image")
}
