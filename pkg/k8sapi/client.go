package k8sapi

import (
	"fmt"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// ClientOptions say how to reach the API server; ipamd fills them from
// its configuration.
type ClientOptions struct {
	UserAgent string
	// Endpoint (CLUSTER_ENDPOINT) overrides the API server address, as
	// upstream allows.
	Endpoint string
	// Kubeconfig (KUBECONFIG) is used when not in a pod.
	Kubeconfig string
}

// NewClient builds a clientset from the in-cluster service account, or
// from o.Kubeconfig when not in a pod.
func NewClient(o ClientOptions) (kubernetes.Interface, error) {
	cfg, err := restConfig(o)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

// NewDynamicClient builds a dynamic client (for custom resources such as
// ENIConfig) reaching the API server exactly as NewClient does.
func NewDynamicClient(o ClientOptions) (dynamic.Interface, error) {
	cfg, err := restConfig(o)
	if err != nil {
		return nil, err
	}
	return dynamic.NewForConfig(cfg)
}

// restConfig is the connection both clients share: in-cluster first,
// then the kubeconfig; the endpoint override and user agent on top.
func restConfig(o ClientOptions) (*rest.Config, error) {
	cfg, err := rest.InClusterConfig()
	if err != nil {
		path := o.Kubeconfig
		if path == "" {
			return nil, fmt.Errorf("not in a cluster and KUBECONFIG unset: %w", err)
		}
		if cfg, err = clientcmd.BuildConfigFromFlags("", path); err != nil {
			return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
		}
	}
	if o.Endpoint != "" {
		cfg.Host = o.Endpoint
	}
	cfg.UserAgent = o.UserAgent
	return cfg, nil
}
