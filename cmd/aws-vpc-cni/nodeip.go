package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/envutil"
)

const (
	// imdsAttempts matches upstream's IMDS client.
	imdsAttempts = 10
	// nodeIPTimeout bounds the IMDS look-up at start.
	nodeIPTimeout = time.Minute
)

// metadataFunc reads one IMDS path (relative to /latest/meta-data/).
type metadataFunc func(ctx context.Context, path string) (string, error)

// imdsMetadata reads IMDS through the SDK's client, which honours
// AWS_EC2_METADATA_SERVICE_ENDPOINT and AWS_EC2_METADATA_DISABLED;
// AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE=IPv6 is honoured here, as the
// init container does. endpoint, when set, overrides the address (tests).
func imdsMetadata(endpoint string) metadataFunc {
	o := imds.Options{Retryer: retry.AddWithMaxAttempts(retry.NewStandard(), imdsAttempts), Endpoint: endpoint}
	if mode, _ := (envutil.Env{}).Value("AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE"); strings.EqualFold(mode, "IPv6") {
		o.EndpointMode = imds.EndpointModeStateIPv6
	}
	client := imds.New(o)
	return func(ctx context.Context, path string) (string, error) {
		out, err := client.GetMetadata(ctx, &imds.GetMetadataInput{Path: path})
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
}

// resolveNodeIP fills s.NodeIP, the egress plugin's SNAT target, as
// upstream's entrypoint does:
//
//   - IPv6 cluster: IMDS local-ipv4, required (the conflist is not
//     written without it). One deliberate difference: with
//     ENABLE_V4_EGRESS=false a missing address is only warned about,
//     since nothing would use it.
//   - IPv4 cluster with ENABLE_V6_EGRESS: IMDS ipv6; missing (an instance
//     without an IPv6 address) is warned about and turns egress off.
//   - otherwise empty, and IMDS is not asked.
func resolveNodeIP(ctx context.Context, s *settings, md metadataFunc, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, nodeIPTimeout)
	defer cancel()
	switch {
	case s.IPv6:
		v, err := md(ctx, "local-ipv4")
		if err == nil {
			if ip := net.ParseIP(v); ip == nil || ip.To4() == nil {
				err = fmt.Errorf("IMDS local-ipv4 %q is not an IPv4 address", v)
			}
		}
		if err != nil {
			if s.EgressEnabled {
				return fmt.Errorf("IPv4 egress (ENABLE_V4_EGRESS, default true in IPv6 mode) needs the node's IPv4 address from IMDS local-ipv4: %w", err)
			}
			log.Warn("no node IPv4 address in IMDS (local-ipv4); IPv4 egress is off (ENABLE_V4_EGRESS=false), so the conflist's nodeIP stays empty", "error", err)
			return nil
		}
		s.NodeIP = v
	case s.EgressEnabled:
		v, err := md(ctx, "ipv6")
		if err == nil {
			if ip := net.ParseIP(v); ip == nil || ip.To4() != nil || !ip.IsGlobalUnicast() {
				err = fmt.Errorf("IMDS ipv6 %q is not a global IPv6 address", v)
			}
		}
		if err != nil {
			log.Warn("ENABLE_V6_EGRESS=true but the node has no IPv6 address in IMDS (ipv6): IPv6 egress disabled", "error", err)
			s.EgressEnabled = false
			return nil
		}
		s.NodeIP = v
	}
	return nil
}
