package eniconfig

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

// RequestTimeout bounds each API request a Reader makes (upstream reads
// the node with a 3 s timeout); Selected makes two.
const RequestTimeout = 3 * time.Second

// The classes of failure, for errors.Is. Each error also wraps the API
// error behind it, if any, so apierrors' helpers still work.
var (
	// ErrNodeLookup: the node could not be read (or no node name is set).
	ErrNodeLookup = errors.New("node lookup failed")
	// ErrNotFound: no ENIConfig has the selected name.
	ErrNotFound = errors.New("not found")
	// ErrInvalid: the selected name, or the ENIConfig's spec, is unusable.
	ErrInvalid = errors.New("invalid")
	// ErrForbidden: RBAC does not let the agent get the ENIConfig.
	ErrForbidden = errors.New("forbidden")
)

// Reader reads the ENIConfig of one node, fresh on every call.
type Reader struct {
	kube kubernetes.Interface
	dyn  dynamic.Interface
	node string
	keys Keys
}

// NewReader reads nodeName's ENIConfig through kube (the node) and dyn
// (the ENIConfig), using k to find its name.
func NewReader(kube kubernetes.Interface, dyn dynamic.Interface, nodeName string, k Keys) *Reader {
	return &Reader{kube: kube, dyn: dyn, node: nodeName, keys: k}
}

// SelectedName returns the name of the node's ENIConfig (see Name); it
// fails only when the node cannot be read. It does not check that the
// ENIConfig exists: this is what introspection's /v1/eni-configs serves.
func (r *Reader) SelectedName(ctx context.Context) (string, error) {
	c, err := r.choose(ctx)
	return c.name, err
}

// Selected returns the spec of the node's ENIConfig, read now.
func (r *Reader) Selected(ctx context.Context) (Spec, error) {
	c, err := r.choose(ctx)
	if err != nil {
		return Spec{}, err
	}
	if c.name == "" {
		return Spec{}, fmt.Errorf("node %s: the ENIConfig name is %w: its %s is empty; set it to the name of an ENIConfig or remove it",
			r.node, ErrInvalid, c.from)
	}
	if msgs := validation.IsDNS1123Subdomain(c.name); len(msgs) > 0 {
		return Spec{}, fmt.Errorf("node %s: the ENIConfig name %q (%s) is %w: %s; fix the value to the name of an ENIConfig",
			r.node, c.name, c.source(), ErrInvalid, strings.Join(msgs, "; "))
	}
	rctx, cancel := context.WithTimeout(ctx, RequestTimeout)
	defer cancel()
	obj, err := r.dyn.Resource(GVR).Get(rctx, c.name, metav1.GetOptions{})
	switch {
	case err == nil:
	case apierrors.IsNotFound(err) && notServed(err):
		return Spec{}, fmt.Errorf("ENIConfig %q for node %s (%s): %w: the API server does not serve %s/%s; install the ENIConfig CRD (charts/aws-vpc-cni/crds): %w",
			c.name, r.node, c.source(), ErrNotFound, GVR.Resource+"."+GVR.Group, GVR.Version, err)
	case apierrors.IsNotFound(err):
		return Spec{}, quietCause{fmt.Errorf("ENIConfig %q for node %s (%s) %w: create ENIConfig %q, or point the node at an existing one",
			c.name, r.node, c.source(), ErrNotFound, c.name), err}
	case apierrors.IsForbidden(err):
		return Spec{}, fmt.Errorf("read ENIConfig %q for node %s: %w: RBAC must allow get on eniconfigs.crd.k8s.amazonaws.com for the agent's service account: %w",
			c.name, r.node, ErrForbidden, err)
	default:
		return Spec{}, fmt.Errorf("read ENIConfig %q for node %s: %w", c.name, r.node, err)
	}
	s, err := decodeSpec(c.name, obj.Object)
	if err != nil {
		return Spec{}, fmt.Errorf("ENIConfig %q for node %s is %w: %w", c.name, r.node, ErrInvalid, err)
	}
	return s, nil
}

// choose reads the node and picks its ENIConfig name.
func (r *Reader) choose(ctx context.Context) (choice, error) {
	if r.node == "" {
		return choice{}, fmt.Errorf("%w: no node name (MY_NODE_NAME) to read the ENIConfig name from", ErrNodeLookup)
	}
	rctx, cancel := context.WithTimeout(ctx, RequestTimeout)
	defer cancel()
	n, err := r.kube.CoreV1().Nodes().Get(rctx, r.node, metav1.GetOptions{})
	switch {
	case err == nil:
		return choose(n.Labels, n.Annotations, r.keys), nil
	case apierrors.IsForbidden(err):
		return choice{}, fmt.Errorf("node %s: %w: RBAC must allow get on nodes for the agent's service account, to read the ENIConfig name: %w",
			r.node, ErrNodeLookup, err)
	case apierrors.IsNotFound(err):
		return choice{}, fmt.Errorf("node %s: %w: no such node; MY_NODE_NAME must be this node's name: %w", r.node, ErrNodeLookup, err)
	default:
		return choice{}, fmt.Errorf("node %s: %w: %w", r.node, ErrNodeLookup, err)
	}
}

// notServed tells "no such resource" (the CRD is not installed) from "no
// such object": the API server names the object in the second case only.
func notServed(err error) bool {
	var se apierrors.APIStatus
	if !errors.As(err, &se) {
		return false
	}
	d := se.Status().Details
	return d == nil || d.Name == ""
}

// quietCause is msg, still unwrapping to cause (for apierrors' helpers)
// where printing cause would only repeat msg.
type quietCause struct{ msg, cause error }

func (e quietCause) Error() string   { return e.msg.Error() }
func (e quietCause) Unwrap() []error { return []error{e.msg, e.cause} }
