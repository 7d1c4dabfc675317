package sgpcontroller

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// CNINodeCRD is the CNINode CustomResourceDefinition (YAML), for tests
// that install it themselves.
//
//go:embed cninode_crd.yaml
var CNINodeCRD []byte

// CNINodeGVR is the CNINode resource.
var CNINodeGVR = schema.GroupVersionResource{Group: "vpcresources.k8s.aws", Version: "v1alpha1", Resource: "cninodes"}

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// InstallCNINodeCRD creates the CNINode CRD unless the server has it, and
// waits (up to a minute) until cninodes are served.
func InstallCNINodeCRD(ctx context.Context, cfg *rest.Config) error {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	return installCRD(ctx, dyn)
}

func installCRD(ctx context.Context, dyn dynamic.Interface) error {
	var obj map[string]any
	if err := yaml.Unmarshal(CNINodeCRD, &obj); err != nil {
		return fmt.Errorf("CNINode CRD: %w", err)
	}
	crd := &unstructured.Unstructured{Object: obj}
	_, err := dyn.Resource(crdGVR).Create(ctx, crd, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create CNINode CRD: %w", err)
	}
	wait, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		_, err := dyn.Resource(CNINodeGVR).List(wait, metav1.ListOptions{Limit: 1})
		if err == nil {
			return nil
		}
		select {
		case <-wait.Done():
			return fmt.Errorf("CNINode CRD not served: %w", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
