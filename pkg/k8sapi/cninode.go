package k8sapi

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"
)

// The node's CNINode (vpcresources.k8s.aws/v1alpha1, cluster-scoped, named
// after the node, created by the VPC resource controller) is how ipamd asks
// that controller for a trunk ENI: it adds features to spec.features, each
// {name, value}. ipamd only ever adds or replaces its own entries; it never
// creates or deletes the object, and never removes a feature.

// CNINodeGVR is the CNINode resource.
var CNINodeGVR = schema.GroupVersionResource{Group: "vpcresources.k8s.aws", Version: "v1alpha1", Resource: "cninodes"}

// Feature names ipamd adds (upstream's).
const (
	// FeatureSecurityGroupsForPods asks for a trunk ENI (empty value).
	FeatureSecurityGroupsForPods = "SecurityGroupsForPods"
	// FeatureCustomNetworking names the node's ENIConfig, so the trunk
	// goes where custom networking puts ENIs.
	FeatureCustomNetworking = "CustomNetworking"
)

// CNINodeFeature is one spec.features entry.
type CNINodeFeature struct {
	Name  string `json:"name"`
	Value string `json:"value,omitempty"`
}

// cniNodeRequestTimeout bounds one get or patch.
const cniNodeRequestTimeout = 5 * time.Second

// WithFeatures is have with every feature of want present: an entry of the
// same name and another value is replaced in place, a missing one appended.
// changed is false when have already holds them all.
func WithFeatures(have []CNINodeFeature, want ...CNINodeFeature) (out []CNINodeFeature, changed bool) {
	out = append([]CNINodeFeature(nil), have...)
	for _, w := range want {
		found := false
		for i := range out {
			if out[i].Name != w.Name {
				continue
			}
			found = true
			if out[i].Value != w.Value {
				out[i].Value, changed = w.Value, true
			}
		}
		if !found {
			out, changed = append(out, w), true
		}
	}
	return out, changed
}

// AddCNINodeFeatures makes the node's CNINode list want among its
// features (WithFeatures). The write is a JSON merge patch carrying the
// resourceVersion read (an optimistic lock: a merge patch replaces the
// whole list, so a concurrent change must not be overwritten); a conflict
// reads again and retries. changed is false when nothing had to be
// written. A missing CNINode is an error (the controller has not made it
// yet).
func AddCNINodeFeatures(ctx context.Context, c dynamic.Interface, node string, want ...CNINodeFeature) (changed bool, err error) {
	res := c.Resource(CNINodeGVR)
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		changed = false
		gctx, cancel := context.WithTimeout(ctx, cniNodeRequestTimeout)
		defer cancel()
		obj, err := res.Get(gctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		have, err := cniNodeFeatures(obj)
		if err != nil {
			return err
		}
		out, ch := WithFeatures(have, want...)
		if !ch {
			return nil
		}
		patch, err := json.Marshal(map[string]any{
			"metadata": map[string]any{"resourceVersion": obj.GetResourceVersion()},
			"spec":     map[string]any{"features": out},
		})
		if err != nil {
			return err
		}
		pctx, cancel := context.WithTimeout(ctx, cniNodeRequestTimeout)
		defer cancel()
		if _, err := res.Patch(pctx, node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return err
		}
		changed = true
		return nil
	})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return false, fmt.Errorf("CNINode %s not found (the VPC resource controller creates it): %w", node, err)
		}
		return false, fmt.Errorf("CNINode %s: add features %v: %w", node, want, err)
	}
	return changed, nil
}

// cniNodeFeatures reads spec.features.
func cniNodeFeatures(obj *unstructured.Unstructured) ([]CNINodeFeature, error) {
	raw, found, err := unstructured.NestedFieldNoCopy(obj.Object, "spec", "features")
	if err != nil || !found || raw == nil {
		return nil, err
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return nil, err
	}
	var fs []CNINodeFeature
	if err := json.Unmarshal(b, &fs); err != nil {
		return nil, fmt.Errorf("CNINode %s: spec.features: %w", obj.GetName(), err)
	}
	return fs, nil
}
