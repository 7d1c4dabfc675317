package main

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var releaseBinaries = []string{"aws-vpc-cni", "aws-k8s-agent", "aws-cni", "grpc-health-probe"}

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
	code := run(args, &out, &errOut)
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

	// The tool's own check agrees, and the same inputs give the same image.
	code, logs = runTool(t, "-check", out)
	assert.Equal(t, 0, code, logs)
	assert.Contains(t, logs, "0755 0:0")
	out2 := filepath.Join(t.TempDir(), "again.tar")
	code, logs = runTool(t, "-out", out2, "-binaries", bin, "-misc", misc, "-tag", "example.com/aws-node:test")
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

	code, logs := runTool(t, "-out", out, "-binaries", bin, "-misc", misc)
	assert.Equal(t, 1, code)
	assert.Contains(t, logs, "aws-cni")

	code, logs = runTool(t, "-out", out, "-binaries", bin, "-misc", misc, "-optional", "aws-cni,10-aws.conflist")
	require.Equal(t, 0, code, logs)
	assert.Contains(t, logs, "WARNING: /app/aws-cni left out")
	img, err := tarball.ImageFromPath(out, nil)
	require.NoError(t, err)
	files, err := listFiles(img)
	require.NoError(t, err)
	assert.NotContains(t, files, "/app/aws-cni")
	assert.Contains(t, files, "/app/10-aws.conflist")

	code, logs = runTool(t, "-check", out)
	assert.Equal(t, 1, code)
	assert.Contains(t, logs, "missing /app/aws-cni")
	code, logs = runTool(t, "-check", out, "-optional", "aws-cni")
	assert.Equal(t, 0, code, logs)
}

// baseTarball writes a one-layer base image with a shell-less rootfs and
// its own environment.
func baseTarball(t *testing.T, arch string) string {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	require.NoError(t, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "usr/", Mode: 0o755}))
	require.NoError(t, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "usr/sbin/", Mode: 0o755}))
	require.NoError(t, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "usr/sbin/iptables", Mode: 0o755, Size: 2}))
	_, err := tw.Write([]byte("ip"))
	require.NoError(t, err)
	require.NoError(t, tw.Close())
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(buf.Bytes())), nil
	})
	require.NoError(t, err)
	img, err := mutate.AppendLayers(empty.Image, layer)
	require.NoError(t, err)
	cfg, err := img.ConfigFile()
	require.NoError(t, err)
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", arch
	cfg.Config.Env = []string{"PATH=/usr/sbin:/usr/bin", "SSL_CERT_FILE=/etc/ssl/certs/ca-bundle.crt"}
	img, err = mutate.ConfigFile(img, cfg)
	require.NoError(t, err)
	p := filepath.Join(t.TempDir(), "base.tar")
	tag, err := name.NewTag("example.com/base:1")
	require.NoError(t, err)
	require.NoError(t, tarball.WriteToFile(p, tag, img))
	return p
}

func TestReleaseImageOnBase(t *testing.T) {
	bin, misc := inputs(t)
	out := filepath.Join(t.TempDir(), "img.tar")
	code, logs := runTool(t, "-base", baseTarball(t, "amd64"), "-out", out, "-binaries", bin, "-misc", misc)
	require.Equal(t, 0, code, logs)
	img, err := tarball.ImageFromPath(out, nil)
	require.NoError(t, err)
	layers, err := img.Layers()
	require.NoError(t, err)
	assert.Len(t, layers, 2, "base layer kept")
	files, err := listFiles(img)
	require.NoError(t, err)
	assert.Contains(t, files, "/usr/sbin/iptables")
	assert.Equal(t, int64(0o755), files["/app/aws-vpc-cni"].Mode)
	cfg, err := img.ConfigFile()
	require.NoError(t, err)
	assert.Equal(t, []string{"PATH=/usr/sbin:/usr/bin", "SSL_CERT_FILE=/etc/ssl/certs/ca-bundle.crt"}, cfg.Config.Env, "base env kept")
	assert.Equal(t, []string{"/app/aws-vpc-cni"}, cfg.Config.Entrypoint)

	code, logs = runTool(t, "-base", baseTarball(t, "arm64"), "-out", out, "-binaries", bin, "-misc", misc)
	assert.Equal(t, 1, code)
	assert.Contains(t, logs, "linux/arm64")
}

func TestInitImage(t *testing.T) {
	bin, _ := inputs(t)
	plugins := t.TempDir()
	write(t, filepath.Join(plugins, "loopback"), "ELF loopback", 0o755)
	write(t, filepath.Join(plugins, "portmap"), "ELF portmap", 0o750)
	write(t, filepath.Join(plugins, "LICENSE"), "Apache-2.0", 0o600)
	require.NoError(t, os.Mkdir(filepath.Join(plugins, "sub"), 0o755))
	out := filepath.Join(t.TempDir(), "init.tar")
	code, logs := runTool(t, "-kind", "init", "-out", out, "-binaries", bin, "-plugins", plugins)
	require.Equal(t, 0, code, logs)

	tag, err := name.NewTag("amazon/amazon-k8s-cni-init:dev")
	require.NoError(t, err)
	img, err := tarball.ImageFromPath(out, &tag)
	require.NoError(t, err)
	layers, err := img.Layers()
	require.NoError(t, err)
	require.Len(t, layers, 1)
	got := layerEntries(t, layers[0])
	assert.Equal(t, map[string]entry{
		"init/":                 {typ: tar.TypeDir, mode: 0o755, uname: "root"},
		"init/aws-vpc-cni-init": {typ: tar.TypeReg, mode: 0o755, uname: "root", body: "ELF aws-vpc-cni-init"},
		"init/loopback":         {typ: tar.TypeReg, mode: 0o755, uname: "root", body: "ELF loopback"},
		"init/portmap":          {typ: tar.TypeReg, mode: 0o755, uname: "root", body: "ELF portmap"},
		"init/LICENSE":          {typ: tar.TypeReg, mode: 0o644, uname: "root", body: "Apache-2.0"},
	}, got)
	cfg, err := img.ConfigFile()
	require.NoError(t, err)
	assert.Equal(t, "/init", cfg.Config.WorkingDir)
	assert.Equal(t, []string{"/init/aws-vpc-cni-init"}, cfg.Config.Cmd)
	assert.Empty(t, cfg.Config.Entrypoint)
	assert.Equal(t, "amd64", cfg.Architecture)
	code, logs = runTool(t, "-kind", "init", "-check", out)
	assert.Equal(t, 0, code, logs)
}

func TestCheckCatchesWrongConfig(t *testing.T) {
	bin, misc := inputs(t)
	img, _, err := build(buildOptions{Kind: kinds["release"], Base: "scratch", OS: "linux", Arch: "amd64",
		Sources: sources{Binaries: bin, Misc: misc}})
	require.NoError(t, err)
	_, err = checkImage(img, kinds["release"], "amd64", nil)
	require.NoError(t, err)
	cfg, err := img.ConfigFile()
	require.NoError(t, err)
	cfg = cfg.DeepCopy()
	cfg.Config.Entrypoint = []string{"/bin/sh"}
	cfg.Config.WorkingDir = "/"
	cfg.Architecture = "arm64"
	bad, err := mutate.ConfigFile(img, cfg)
	require.NoError(t, err)
	_, err = checkImage(bad, kinds["release"], "amd64", nil)
	require.Error(t, err)
	for _, s := range []string{"entrypoint", "working dir", "platform"} {
		assert.Contains(t, err.Error(), s)
	}
	_, err = checkImage(img, kinds["init"], "amd64", nil)
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
	code, logs := runTool(t, "-out", out, "-binaries", bin, "-misc", misc)
	require.Equal(t, 0, code, logs)
	img, err := tarball.ImageFromPath(out, nil)
	require.NoError(t, err)
	cfg, err := img.ConfigFile()
	require.NoError(t, err)
	assert.Equal(t, int64(1700000000), cfg.Created.Unix())
}
