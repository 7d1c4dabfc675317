package k8sapi

import (
	"fmt"
	"os"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// NewClient builds a clientset from the in-cluster service account, or from
// KUBECONFIG when not in a pod. CLUSTER_ENDPOINT overrides the API server
// address, as upstream allows.
func NewClient(userAgent string) (kubernetes.Interface, error) {
	cfg, err := rest.InClusterConfig()
	if err != nil {
		path := os.Getenv("KUBECONFIG")
		if path == "" {
			return nil, fmt.Errorf("not in a cluster and KUBECONFIG unset: %w", err)
		}
		if cfg, err = clientcmd.BuildConfigFromFlags("", path); err != nil {
			return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
		}
	}
	if ep := os.Getenv("CLUSTER_ENDPOINT"); ep != "" {
		cfg.Host = ep
	}
	cfg.UserAgent = userAgent
	return kubernetes.NewForConfig(cfg)
}
