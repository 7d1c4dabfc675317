// Package ctxtime owns waiting that a context can cut short: the one
// helper the AWS client's retries, the node watch's backoff and the
// leaked-ENI sweep's period share. Like every pkg/utils package it imports
// nothing else of this module.
package ctxtime

import (
	"context"
	"time"
)

// Sleep waits for d, or until ctx is done, whichever comes first. It
// returns nil after the full wait and ctx's error when cut short.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
