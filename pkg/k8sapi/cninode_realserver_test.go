package k8sapi

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/aws/amazon-vpc-cni-k8s/test/apiserver"
)

// cniNodeCRD is the shape of the VPC resource controller's CNINode CRD
// that ipamd relies on (spec.features[].name/value), cluster-scoped.
const cniNodeCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: cninodes.vpcresources.k8s.aws
spec:
  group: vpcresources.k8s.aws
  scope: Cluster
  names: {kind: CNINode, listKind: CNINodeList, plural: cninodes, singular: cninode, shortNames: [cnd]}
  versions:
  - name: v1alpha1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              features:
                type: array
                items:
                  type: object
                  properties:
                    name: {type: string}
                    value: {type: string}
              tags:
                type: object
                additionalProperties: {type: string}
          status:
            type: object
            x-kubernetes-preserve-unknown-fields: true
`

func withCNINodeCRD(t *testing.T, s *apiserver.Server) dynamic.Interface {
	t.Helper()
	a, err := s.NewApplier("default")
	require.NoError(t, err)
	_, err = a.Apply([]string{cniNodeCRD}, func(int) string { return "CNINode CRD" })
	require.NoError(t, err)
	admin, err := dynamic.NewForConfig(s.Admin())
	require.NoError(t, err)
	return admin
}

// Against the real API server, with only the chart's CNINode verbs: the
// feature is added, a same-named entry with another value is replaced, a
// second call writes nothing, a missing CNINode is an error.
func TestRealServerCNINodeFeatures(t *testing.T) {
	s := realServer(t)
	ctx := context.Background()
	admin := withCNINodeCRD(t, s)
	name := "real-node-cninode"
	_, err := admin.Resource(CNINodeGVR).Create(ctx, cniNodeObject(name, "", cn("old"), CNINodeFeature{Name: "Other"}), metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = admin.Resource(CNINodeGVR).Delete(ctx, name, metav1.DeleteOptions{}) })

	cfg, err := s.ServiceAccountConfig(ctx, "kube-system", "k8sapi-cninode")
	require.NoError(t, err)
	grantCNINodes(t, s, "k8sapi-cninode")
	c, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)

	var changed bool
	eventually(t, 10*time.Second, func() bool {
		changed, err = AddCNINodeFeatures(ctx, c, name, cn("eni-config-a"), sgp)
		return err == nil
	}, "features added with get and patch on cninodes")
	assert.True(t, changed)
	obj, err := admin.Resource(CNINodeGVR).Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	fs, err := cniNodeFeatures(obj)
	require.NoError(t, err)
	assert.Equal(t, []CNINodeFeature{cn("eni-config-a"), {Name: "Other"}, sgp}, fs)

	rv := obj.GetResourceVersion()
	changed, err = AddCNINodeFeatures(ctx, c, name, sgp)
	require.NoError(t, err)
	assert.False(t, changed, "already there: nothing written")
	obj, err = admin.Resource(CNINodeGVR).Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, rv, obj.GetResourceVersion())

	_, err = AddCNINodeFeatures(ctx, c, "no-such-node", sgp)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not found")
}

func grantCNINodes(t *testing.T, s *apiserver.Server, account string) {
	t.Helper()
	ctx := context.Background()
	admin := adminOf(t, s)
	_, err := admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: account},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"vpcresources.k8s.aws"}, Resources: []string{"cninodes"},
			Verbs: []string{"get", "list", "watch", "patch"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: account},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: account},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "kube-system", Name: account}}}, metav1.CreateOptions{})
	require.NoError(t, err)
}
