package ec2sim

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// ec2Request is one EC2 Query request as read off the wire.
type ec2Request struct {
	action  string
	form    url.Values
	attempt int       // the SDK's attempt number, 0 when not sent
	start   time.Time // when the body had been read
	err     *APIError // set when the request could not be read
}

func readEC2Request(r *http.Request) ec2Request {
	req := ec2Request{attempt: sdkAttempt(r.Header.Get("Amz-Sdk-Request"))}
	if r.Method != http.MethodPost {
		req.err = newError(CodeUnsupportedHTTPVerb, "ec2sim accepts only POST requests with a form body")
	} else if err := r.ParseForm(); err != nil {
		req.err = newError(CodeInvalidParameterValue, "Malformed request body: %v", err)
	} else {
		req.form = r.PostForm
		req.action = r.PostForm.Get("Action")
	}
	req.start = time.Now()
	return req
}

// serveEC2 answers one EC2 Query request sent to a standalone Sim.
func (s *Sim) serveEC2(w http.ResponseWriter, r *http.Request) {
	s.answerEC2(r.Context(), w, readEC2Request(r))
}

// answerEC2 answers a request routed to this simulator and logs it in its
// call log and tally, and in its account's tally if it has one.
func (s *Sim) answerEC2(ctx context.Context, w http.ResponseWriter, req ec2Request) {
	reqID := s.front.newRequestID()
	var resp response
	g, apiErr := gateNone, req.err
	if apiErr == nil {
		resp, g, apiErr = s.handleEC2(ctx, req.action, params{req.form})
	}
	ans := encodeAnswer(reqID, req.action, resp, apiErr)
	call := Call{Time: req.start, Action: req.action, ErrorCode: ans.code, Attempt: req.attempt}
	waitTurnaround(req.start)
	s.log.add(call)
	s.tally.add(call, g)
	if t := s.front.tally; t != nil {
		t.add(call, g)
	}
	s.logger.Debug("ec2sim: EC2 call", "action", req.action, "error", ans.code, "status", ans.status)
	ans.write(w, reqID)
}

// ec2Answer is an encoded answer.
type ec2Answer struct {
	status int
	code   string // the error code, "" on success
	body   []byte
}

func encodeAnswer(reqID, action string, resp response, apiErr *APIError) ec2Answer {
	if apiErr != nil {
		return ec2Answer{status: apiErr.Status, code: apiErr.Code, body: encodeXML("Response", "", &xmlErrorResponse{
			Errors:    []xmlError{{Code: apiErr.Code, Message: apiErr.Message}},
			RequestID: reqID,
		})}
	}
	resp.setRequestID(reqID)
	return ec2Answer{status: http.StatusOK, body: encodeXML(action+"Response", ec2Namespace, resp)}
}

func (a ec2Answer) write(w http.ResponseWriter, reqID string) {
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(a.body)))
	w.Header().Set("X-Amzn-RequestId", reqID)
	w.WriteHeader(a.status)
	_, _ = w.Write(a.body)
}

// waitTurnaround sleeps until minTurnaround has passed since start.
func waitTurnaround(start time.Time) {
	if d := minTurnaround - time.Since(start); d > 0 {
		time.Sleep(d)
	}
}

// sdkAttempt parses the SDK's "Amz-Sdk-Request: attempt=N; max=M" header.
func sdkAttempt(h string) int {
	for _, part := range strings.Split(h, ";") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(part), "attempt="); ok {
			if n, err := strconv.Atoi(v); err == nil {
				return n
			}
		}
	}
	return 0
}

// requestIDs numbers the answers of one endpoint, so that request IDs are
// unique across the nodes of an account.
type requestIDs struct{ seq atomic.Uint64 }

func (r *requestIDs) newRequestID() string {
	return fmt.Sprintf("5e1a0000-0000-4000-8000-%012x", r.seq.Add(1))
}

// encodeXML renders v under a root element, with the namespace if given.
func encodeXML(root, namespace string, v any) []byte {
	var buf bytes.Buffer
	buf.WriteString(xml.Header)
	start := xml.StartElement{Name: xml.Name{Local: root}}
	if namespace != "" {
		start.Attr = []xml.Attr{{Name: xml.Name{Local: "xmlns"}, Value: namespace}}
	}
	if err := xml.NewEncoder(&buf).EncodeElement(v, start); err != nil {
		// Only a simulator bug (an unencodable type) gets here.
		panic(fmt.Sprintf("ec2sim: encode %s: %v", root, err))
	}
	return buf.Bytes()
}
