package k8sapi

import (
	"context"
	"fmt"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Access is one permission ipamd needs: a verb on a resource of an API
// group ("" is the core group), in any namespace.
type Access struct {
	Verb, Group, Resource string
}

func (a Access) String() string {
	group := a.Group
	if group == "" {
		group = "core"
	}
	return fmt.Sprintf("%s %s (%s)", a.Verb, a.Resource, group)
}

// MissingAccess asks the API server, one SelfSubjectAccessReview each (which
// every authenticated identity may create), which of the permissions the
// client's identity lacks. An error means the server could not be asked:
// the caller decides nothing from it.
func MissingAccess(ctx context.Context, client kubernetes.Interface, need ...Access) ([]Access, error) {
	var missing []Access
	for _, a := range need {
		rctx, cancel := context.WithTimeout(ctx, APIServerRequestTimeout)
		review, err := client.AuthorizationV1().SelfSubjectAccessReviews().Create(rctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: a.Verb, Group: a.Group, Resource: a.Resource,
			}},
		}, metav1.CreateOptions{})
		cancel()
		if err != nil {
			return nil, fmt.Errorf("ask the API server whether this service account may %s: %w", a, err)
		}
		if !review.Status.Allowed {
			missing = append(missing, a)
		}
	}
	return missing, nil
}
