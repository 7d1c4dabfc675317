package introspect

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/clocktest"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/logger"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/loglimit"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// Introspection logs its requests as upstream does, but a client hammering
// it (any path, known or not) gets a burst of lines a minute per path of
// ours and a count, not a line per request.
func TestIntrospectionRequestLoggingIsRateLimited(t *testing.T) {
	var out lockedBuffer
	clock := clocktest.New()
	store := datastore.New(datastore.Config{})
	t.Cleanup(func() { store.Close() })
	h := New(Config{ENIs: store, Log: loglimit.New(logger.New(&out, slog.LevelDebug), loglimit.Config{Clock: clock})})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	const each = 300
	for i := range each {
		for _, path := range []string{PathENIs, fmt.Sprintf("/no/such/path/%d", i)} {
			resp, err := http.Get(srv.URL + path)
			require.NoError(t, err)
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode, path)
		}
	}
	clock.Advance(loglimit.DefaultInterval)

	requests := map[string]int{}
	suppressed := map[string]float64{}
	out.mu.Lock()
	sc := bufio.NewScanner(bytes.NewReader(out.b.Bytes()))
	out.mu.Unlock()
	for sc.Scan() {
		var l map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &l))
		assert.Equal(t, "debug", l["level"])
		switch l["msg"] {
		case "introspection request":
			p := l["path"].(string)
			if p != PathENIs {
				p = "unknown"
			}
			requests[p]++
		case loglimit.SummaryMsg:
			suppressed[l["key"].(string)] = l["suppressed"].(float64)
		default:
			t.Errorf("unexpected line %v", l)
		}
	}
	assert.Equal(t, map[string]int{PathENIs: loglimit.DefaultBurst, "unknown": loglimit.DefaultBurst}, requests)
	assert.Equal(t, map[string]float64{PathENIs: each - loglimit.DefaultBurst, "/": each - loglimit.DefaultBurst}, suppressed)
}
