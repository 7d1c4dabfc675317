package apiserver

import (
	"fmt"

	"helm.sh/helm/v3/pkg/chart"

	"github.com/aws/amazon-vpc-cni-k8s/scripts/generate-config/render"
)

// ApplyChart renders ch with vals into namespace (CRDs included, strict)
// and applies every object as admin (see Applier.Apply), returning what
// the server does not serve.
func (s *Server) ApplyChart(ch *chart.Chart, namespace string, vals map[string]interface{}) (skipped []string, err error) {
	docs, err := render.RenderChart(ch, render.Options{Values: vals, Namespace: namespace, IncludeCRDs: true, Strict: true})
	if err != nil {
		return nil, fmt.Errorf("render %s: %w", ch.Name(), err)
	}
	a, err := s.NewApplier(namespace)
	if err != nil {
		return nil, err
	}
	texts := make([]string, len(docs))
	for i, d := range docs {
		texts[i] = d.Content
	}
	return a.Apply(texts, func(i int) string { return docs[i].Source })
}
