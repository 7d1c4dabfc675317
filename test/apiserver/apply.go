package apiserver

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"
)

// Applier creates or updates manifests as admin with strict field
// validation, as `kubectl apply --validate=strict` would.
type Applier struct {
	dyn       dynamic.Interface
	mapper    *restmapper.DeferredDiscoveryRESTMapper
	namespace string // for namespaced objects that name none
}

// NewApplier applies to s; namespace is where namespaced objects without
// one go.
func (s *Server) NewApplier(namespace string) (*Applier, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(s.Admin())
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(s.Admin())
	if err != nil {
		return nil, err
	}
	return &Applier{dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc)),
		namespace: namespace}, nil
}

// Apply puts every YAML document in place, CRDs first (and waits until
// they are served). Objects of an API the server does not serve (a
// PodMonitor without the Prometheus operator) are left out and returned as
// Kind/name. Blank documents are ignored; source names each document in
// errors.
func (a *Applier) Apply(docs []string, source func(i int) string) (skipped []string, err error) {
	var crds, rest []*unstructured.Unstructured
	for i, d := range docs {
		if strings.TrimSpace(d) == "" {
			continue
		}
		js, err := yaml.YAMLToJSON([]byte(d))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", source(i), err)
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(js); err != nil {
			return nil, fmt.Errorf("%s: %w", source(i), err)
		}
		if u.GetKind() == "CustomResourceDefinition" {
			crds = append(crds, u)
		} else {
			rest = append(rest, u)
		}
	}
	for _, u := range crds {
		if _, err := a.Put(u); err != nil {
			return nil, err
		}
	}
	if len(crds) > 0 {
		if err := a.waitServed(crds); err != nil {
			return nil, err
		}
	}
	for _, u := range rest {
		served, err := a.Put(u)
		if err != nil {
			return nil, err
		}
		if !served {
			skipped = append(skipped, u.GetKind()+"/"+u.GetName())
		}
	}
	return skipped, nil
}

// Put creates u, or updates it (keeping the server's resourceVersion);
// false when its API is not served.
func (a *Applier) Put(u *unstructured.Unstructured) (served bool, err error) {
	gvk := u.GroupVersionKind()
	m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("%s %s: %w", gvk, u.GetName(), err)
	}
	var r dynamic.ResourceInterface = a.dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		if u.GetNamespace() == "" {
			u.SetNamespace(a.namespace)
		}
		r = a.dyn.Resource(m.Resource).Namespace(u.GetNamespace())
	}
	ctx := context.Background()
	_, err = r.Create(ctx, u, metav1.CreateOptions{FieldValidation: "Strict"})
	if apierrors.IsAlreadyExists(err) {
		cur, gerr := r.Get(ctx, u.GetName(), metav1.GetOptions{})
		if gerr != nil {
			return false, fmt.Errorf("get %s %s: %w", gvk.Kind, u.GetName(), gerr)
		}
		u.SetResourceVersion(cur.GetResourceVersion())
		_, err = r.Update(ctx, u, metav1.UpdateOptions{FieldValidation: "Strict"})
	}
	if err != nil {
		return false, fmt.Errorf("the API server refuses %s %s: %w", gvk.Kind, u.GetName(), err)
	}
	return true, nil
}

func (a *Applier) waitServed(crds []*unstructured.Unstructured) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		a.mapper.Reset()
		missing := ""
		for _, c := range crds {
			group, _, _ := unstructured.NestedString(c.Object, "spec", "group")
			kind, _, _ := unstructured.NestedString(c.Object, "spec", "names", "kind")
			if _, err := a.mapper.RESTMapping(schema.GroupKind{Group: group, Kind: kind}); err != nil {
				missing = kind
			}
		}
		if missing == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("CRD %s not served after 30 s", missing)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
