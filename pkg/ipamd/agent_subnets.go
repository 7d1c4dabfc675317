package ipamd

import (
	"github.com/aws/amazon-vpc-cni-k8s/pkg/subnetfigures"
)

// subnetFigures are the AWS client's free-address figures of the subnets
// the node uses; nil before the client exists and with a development pool.
func (a *Agent) subnetFigures() *subnetfigures.Figures {
	if a.aws == nil {
		return nil
	}
	return a.aws.SubnetFigures()
}

// trackENISubnets tells the figures which subnets ipamd's ENIs are in, so
// the gauges and /v1/subnets keep those (with the candidates for new ENIs)
// and drop a subnet once no ENI is left in it.
func (a *Agent) trackENISubnets() {
	figs := a.subnetFigures()
	if figs == nil || a.store == nil {
		return
	}
	// Called again once the cards above 0 have started: the view it
	// keeps is of the cards known at the call.
	enis := everyCardsENIs{a}.snapshot()
	figs.TrackENIs(func() map[string][]string {
		out := map[string][]string{}
		for _, e := range enis.ENISummaries() {
			out[e.Info.SubnetID] = append(out[e.Info.SubnetID], e.Info.ID)
		}
		return out
	})
}

// subnetsIntrospection answers /v1/subnets.
func (a *Agent) subnetsIntrospection(figs *subnetfigures.Figures) func() any {
	return func() any { return subnetfigures.Report{Subnets: figs.All()} }
}
