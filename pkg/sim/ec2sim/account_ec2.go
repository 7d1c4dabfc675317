package ec2sim

import (
	"net/http"
	"strings"
)

// serveEC2 routes one request to the node whose access key signed it.
// The routing map's lock is released before the node does any work.
func (a *Account) serveEC2(w http.ResponseWriter, r *http.Request) {
	req := readEC2Request(r)
	key := accessKeyID(r.Header.Get("Authorization"))
	if s := a.node(key); s != nil {
		s.answerEC2(r.Context(), w, req)
		return
	}
	msg := "AWS was not able to validate the provided access credentials"
	if key == "" {
		msg = "The request is not signed with an access key (ec2sim routes requests to nodes by the SigV4 Credential's key ID)"
	}
	reqID := a.front.newRequestID()
	ans := encodeAnswer(reqID, req.action, nil, newError(CodeAuthFailure, "%s", msg))
	call := Call{Time: req.start, Action: req.action, ErrorCode: ans.code, Attempt: req.attempt}
	waitTurnaround(req.start)
	a.tally.add(call, gateNone)
	a.logger.Debug("ec2sim: EC2 call refused", "action", req.action, "accessKey", key)
	ans.write(w, reqID)
}

// accessKeyID returns the key ID of a SigV4 Authorization header
// ("AWS4-HMAC-SHA256 Credential=<key ID>/<date>/<region>/ec2/aws4_request,
// SignedHeaders=..., Signature=..."), "" if it has none. The signature
// itself is not checked.
func accessKeyID(h string) string {
	rest, ok := strings.CutPrefix(h, "AWS4-HMAC-SHA256 ")
	if !ok {
		return ""
	}
	for _, part := range strings.Split(rest, ",") {
		if cred, ok := strings.CutPrefix(strings.TrimSpace(part), "Credential="); ok {
			key, _, _ := strings.Cut(cred, "/")
			return key
		}
	}
	return ""
}
