package introspect

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// get asks h for path and decodes the JSON answer into out.
func get(t *testing.T, h http.Handler, path string, out any) int {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	assert.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), out))
	return rec.Code
}

// /v1/eni-configs names the node's ENIConfig as a JSON string, and answers
// 404 when there is no API client or the node cannot be read.
func TestENIConfigPath(t *testing.T) {
	var body string
	assert.Equal(t, http.StatusNotFound, get(t, New(Config{}), PathENIConfigs, &body))

	name := func(context.Context) (string, error) { return "us-west-2a", nil }
	assert.Equal(t, http.StatusOK, get(t, New(Config{ENIConfigName: name}), PathENIConfigs, &body))
	assert.Equal(t, "us-west-2a", body)

	gone := func(context.Context) (string, error) { return "", errors.New(`nodes "n" not found`) }
	assert.Equal(t, http.StatusNotFound, get(t, New(Config{ENIConfigName: gone}), PathENIConfigs, &body))
	assert.Equal(t, `nodes "n" not found`, body)
}

// The agent's extra paths are served and listed with upstream's.
func TestExtraPaths(t *testing.T) {
	h := New(Config{Extra: map[string]func() any{PathReconciler: func() any { return map[string]int{"passes": 3} }}})
	var rec map[string]int
	assert.Equal(t, http.StatusOK, get(t, h, PathReconciler, &rec))
	assert.Equal(t, map[string]int{"passes": 3}, rec)

	var cmds struct{ AvailableCommands []string }
	assert.Equal(t, http.StatusOK, get(t, h, "/nope", &cmds))
	assert.ElementsMatch(t, []string{PathENIs, PathENIConfigs, PathNetworkUtilsEnv, PathIPAMDEnv, PathReconciler}, cmds.AvailableCommands)
}
