package k8sapi

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// NodeMaxPods returns the node's status.capacity.pods.
func NodeMaxPods(ctx context.Context, c kubernetes.Interface, nodeName string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	node, err := c.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		return 0, fmt.Errorf("get node %s: %w", nodeName, err)
	}
	q, ok := node.Status.Capacity[corev1.ResourcePods]
	if !ok {
		return 0, fmt.Errorf("node %s reports no pod capacity", nodeName)
	}
	n, ok := q.AsInt64()
	if !ok || n <= 0 {
		return 0, fmt.Errorf("node %s pod capacity %s is not a positive integer", nodeName, q.String())
	}
	return int(n), nil
}
