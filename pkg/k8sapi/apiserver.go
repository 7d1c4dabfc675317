package k8sapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
)

// Upstream's API-server wait for settings that cannot work without it
// (ANNOTATE_POD_IP among them): ask for the server version every 2 s, each
// request bounded by 5 s.
const (
	APIServerPollInterval   = 2 * time.Second
	APIServerRequestTimeout = 5 * time.Second
)

// WaitForAPIServer blocks until the API server answers a version request,
// as upstream ipamd does at start when a setting needs the API server: a
// request that times out is retried every interval; any other error, or
// ctx ending, is returned (ipamd then refuses to start).
func WaitForAPIServer(ctx context.Context, c kubernetes.Interface, interval, timeout time.Duration, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	for {
		rctx, cancel := context.WithTimeout(ctx, timeout)
		v, err := c.Discovery().ServerVersionWithContext(rctx)
		cancel()
		switch {
		case err == nil:
			log.Info("API server reachable", "version", v.GitVersion)
			return nil
		case ctx.Err() != nil:
			return fmt.Errorf("wait for the API server: %w", ctx.Err())
		case !isTimeout(err):
			return fmt.Errorf("API server: %w", err)
		}
		log.Warn("API server did not answer in time; retrying", "in", interval.String(), "error", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for the API server: %w", ctx.Err())
		case <-time.After(interval):
		}
	}
}

// isTimeout reports errors that mean the API server did not answer in time.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) ||
		(errors.As(err, &ne) && ne.Timeout())
}
