package ipamd

import "errors"

// TEMPORARY (issue 38, helper H5): a stand-in for H4's trunkLinkIndex in
// pkg/ipamd/agent_trunk.go, so the RPC side builds on its own. The lead
// deletes this file when merging H4's branch; nothing else refers to it.
func (a *Agent) trunkLinkIndex() (int, error) {
	return 0, errors.New("the trunk ENI's link index is not known yet (stand-in until agent_trunk.go)")
}
