package ipamd

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/devpool"
)

// With ENABLE_POD_ENI ipamd refuses to start when its service account may
// not get, list and watch pods (every ADD would fail); it starts when it
// may, or when the API server cannot be asked; and it needs its node's
// name to watch that node's pods.
func TestPodENINeedsToReadTheNodesPods(t *testing.T) {
	for _, tc := range []struct {
		name    string
		node    string
		review  func() (runtime.Object, error)
		refused string
	}{
		{"denied", sgpNode, func() (runtime.Object, error) {
			return &authorizationv1.SelfSubjectAccessReview{Status: authorizationv1.SubjectAccessReviewStatus{Allowed: false}}, nil
		}, "may not [get pods (core) list pods (core) watch pods (core)]"},
		{"allowed", sgpNode, func() (runtime.Object, error) {
			return &authorizationv1.SelfSubjectAccessReview{Status: authorizationv1.SubjectAccessReviewStatus{Allowed: true}}, nil
		}, ""},
		{"review fails", sgpNode, func() (runtime.Object, error) { return nil, apierrors.NewServiceUnavailable("busy") }, ""},
		{"no node name", "", func() (runtime.Object, error) {
			return &authorizationv1.SelfSubjectAccessReview{Status: authorizationv1.SubjectAccessReviewStatus{Allowed: true}}, nil
		}, "MY_NODE_NAME"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := testConfig(dir)
			cfg.EnablePodENI, cfg.NodeName = true, tc.node
			k8s := fake.NewClientset()
			k8s.PrependReactor("create", "selfsubjectaccessreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
				obj, err := tc.review()
				return true, obj, err
			})
			a, err := NewAgent(context.Background(), Options{Config: cfg, SocketPath: filepath.Join(dir, "s.sock"),
				DelQueueDir: filepath.Join(dir, "q"), DevPool: &devpool.Pool{ENIs: 1, PerENI: 1}, K8s: k8s})
			if tc.refused == "" {
				require.NoError(t, err)
				assert.NotNil(t, a.podCache)
				a.closeClients()
				_ = a.store.Close()
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), "ENABLE_POD_ENI=true")
			assert.Contains(t, err.Error(), tc.refused)
		})
	}
}
