package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/cp"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/envutil"
)

const (
	selfName              = "aws-vpc-cni-init"
	defaultHostCNIBinPath = "/host/opt/cni/bin"
	defaultProcSys        = "/proc/sys"
	// imdsAttempts matches upstream's IMDS client (the node may still be
	// booting when the init container runs).
	imdsAttempts = 10
)

// options are the init container's inputs besides the environment.
type options struct {
	WorkDir string // files to install (image: /init, the working directory)
	ProcSys string // sysctl tree (default /proc/sys; a fake tree in tests)
	Self    string // this binary's file name, never copied
}

// deps reach outside the process; tests replace them.
type deps struct {
	// PrimaryMAC returns the MAC address of the instance's primary ENI.
	PrimaryMAC func(ctx context.Context) (string, error)
	// Interfaces lists the host's network interfaces.
	Interfaces func() ([]net.Interface, error)
}

// sysctl is one /proc/sys write.
type sysctl struct{ key, value string }

// run installs the files and sets the sysctls. Any error is fatal.
// Unparsable booleans are logged and take their default.
func run(ctx context.Context, o options, lookup envutil.Lookup, d deps, log *slog.Logger) error {
	env := envutil.Env{Lookup: lookup, Warn: envutil.SlogWarn(log)}
	binDir := env.String("HOST_CNI_BIN_PATH", defaultHostCNIBinPath)
	copied, err := cp.Dir(o.WorkDir, binDir, func(name string) bool { return name == selfName || name == o.Self })
	if err != nil {
		return fmt.Errorf("install CNI plugins into %s: %w", binDir, err)
	}
	log.Info("installed files", "dir", binDir, "files", strings.Join(copied, ","))

	mac, err := d.PrimaryMAC(ctx)
	if err != nil {
		return fmt.Errorf("primary ENI MAC from IMDS: %w", err)
	}
	primary, err := interfaceByMAC(mac, d.Interfaces)
	if err != nil {
		return err
	}
	log.Info("found the primary interface", "name", primary, "mac", mac)

	for _, s := range plan(primary, env) {
		path := filepath.Join(o.ProcSys, filepath.FromSlash(s.key))
		if s.key == "net/ipv4/tcp_early_demux" {
			// Not every kernel has it; upstream skips it then.
			if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
				log.Info("sysctl not present; skipped", "key", s.key)
				continue
			}
		}
		if err := writeSysctl(path, s.value); err != nil {
			return fmt.Errorf("set %s=%s: %w", s.key, s.value, err)
		}
		log.Info("set sysctl", "key", s.key, "value", s.value)
	}
	return nil
}

// plan lists the sysctls upstream's init container sets, in its order.
func plan(primary string, env envutil.Env) []sysctl {
	// Loose reverse-path filtering: replies to pods on secondary ENIs leave
	// through another interface than the one their request came in on.
	out := []sysctl{{"net/ipv4/conf/" + primary + "/rp_filter", "2"}}
	demux := "1"
	if env.StrictBool("DISABLE_TCP_EARLY_DEMUX", false) {
		demux = "0"
	}
	out = append(out, sysctl{"net/ipv4/tcp_early_demux", demux})
	v6 := env.StrictBool("ENABLE_IPv6", false)
	if v6 {
		out = append(out, sysctl{"net/ipv6/conf/all/disable_ipv6", "0"})
	}
	if v6 || env.StrictBool("ENABLE_V6_EGRESS", false) {
		out = append(out,
			sysctl{"net/ipv6/conf/all/forwarding", "1"},
			// Keep taking router advertisements with forwarding on.
			sysctl{"net/ipv6/conf/" + primary + "/accept_ra", "2"})
	}
	return out
}

// interfaceByMAC names the host interface whose hardware address is mac.
func interfaceByMAC(mac string, list func() ([]net.Interface, error)) (string, error) {
	want, err := net.ParseMAC(strings.TrimSpace(mac))
	if err != nil {
		return "", fmt.Errorf("IMDS mac %q: %w", mac, err)
	}
	ifs, err := list()
	if err != nil {
		return "", fmt.Errorf("list interfaces: %w", err)
	}
	for _, i := range ifs {
		if i.HardwareAddr.String() == want.String() {
			return i.Name, nil
		}
	}
	return "", fmt.Errorf("no interface has the primary ENI's MAC %s", want)
}

// writeSysctl writes an existing /proc/sys entry (never creates one).
func writeSysctl(path, value string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	if _, err := io.WriteString(f, value); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// imdsPrimaryMAC reads IMDS "mac" through the SDK's IMDS client, which
// honours AWS_EC2_METADATA_SERVICE_ENDPOINT and AWS_EC2_METADATA_DISABLED;
// AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE=IPv6 (read by the SDK's shared
// config, which this small binary does not load) is honoured here.
func imdsPrimaryMAC(ctx context.Context) (string, error) {
	o := imds.Options{Retryer: retry.AddWithMaxAttempts(retry.NewStandard(), imdsAttempts)}
	if mode, _ := (envutil.Env{}).Value("AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE"); strings.EqualFold(mode, "IPv6") {
		o.EndpointMode = imds.EndpointModeStateIPv6
	}
	client := imds.New(o)
	out, err := client.GetMetadata(ctx, &imds.GetMetadataInput{Path: "mac"})
	if err != nil {
		return "", err
	}
	defer out.Content.Close()
	b, err := io.ReadAll(out.Content)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}
