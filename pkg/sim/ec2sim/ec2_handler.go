package ec2sim

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// apiVersion is the only EC2 API version the simulator speaks.
const apiVersion = "2016-11-15"

// minTurnaround is the least time between reading a request and answering
// it. Answering faster exposes a client-side race (smithy-go closes the
// request body once response headers arrive, while net/http may still be
// probing that body after sending it; the probe fails, net/http closes the
// connection and a response bigger than its first read fails mid-body, so
// the SDK retries the call, mutations included). Real EC2 is never this
// fast; 3 ms made the race vanish in 100 runs under -race on 2 cores.
const minTurnaround = 3 * time.Millisecond

// actionDef describes one EC2 action: the parameters it accepts (besides
// Action, Version and DryRun; "#" matches a list index) and its handler,
// which runs with s.mu held.
type actionDef struct {
	params  []string
	mutates bool
	run     func(s *Sim, p params, now time.Time) (response, error)
}

var filterParams = []string{"Filter.#.Name", "Filter.#.Value.#"}

var actions = map[string]actionDef{
	"DescribeInstances": {
		params: []string{"InstanceId.#"},
		run:    (*Sim).describeInstances,
	},
	"DescribeInstanceTypes": {
		params: []string{"InstanceType.#"},
		run:    (*Sim).describeInstanceTypes,
	},
	"DescribeNetworkInterfaces": {
		params: append([]string{"NetworkInterfaceId.#", "MaxResults", "NextToken"}, filterParams...),
		run:    (*Sim).describeNetworkInterfaces,
	},
	"DescribeSubnets": {
		params: append([]string{"SubnetId.#", "MaxResults", "NextToken"}, filterParams...),
		run:    (*Sim).describeSubnets,
	},
	"DescribeVpcs": {
		params: append([]string{"VpcId.#", "MaxResults", "NextToken"}, filterParams...),
		run:    (*Sim).describeVpcs,
	},
	"CreateNetworkInterface": {
		params: []string{"SubnetId", "Description", "SecurityGroupId.#", "PrivateIpAddress",
			"SecondaryPrivateIpAddressCount", "Ipv4PrefixCount", "ClientToken",
			"Ipv6AddressCount", "Ipv6Addresses.#.Ipv6Address", "Ipv6PrefixCount", "Ipv6Prefix.#.Ipv6Prefix",
			"TagSpecification.#.ResourceType", "TagSpecification.#.Tag.#.Key", "TagSpecification.#.Tag.#.Value"},
		mutates: true,
		run:     (*Sim).createNetworkInterface,
	},
	"AttachNetworkInterface": {
		params:  []string{"NetworkInterfaceId", "InstanceId", "DeviceIndex", "NetworkCardIndex"},
		mutates: true,
		run:     (*Sim).attachNetworkInterface,
	},
	"ModifyNetworkInterfaceAttribute": {
		params: []string{"NetworkInterfaceId", "Attachment.AttachmentId", "Attachment.DeleteOnTermination",
			"SecurityGroupId.#", "Description.Value", "SourceDestCheck.Value"},
		mutates: true,
		run:     (*Sim).modifyNetworkInterfaceAttribute,
	},
	"DetachNetworkInterface": {
		params:  []string{"AttachmentId", "Force"},
		mutates: true,
		run:     (*Sim).detachNetworkInterface,
	},
	"DeleteNetworkInterface": {
		params:  []string{"NetworkInterfaceId"},
		mutates: true,
		run:     (*Sim).deleteNetworkInterface,
	},
	"AssignPrivateIpAddresses": {
		params: []string{"NetworkInterfaceId", "SecondaryPrivateIpAddressCount", "PrivateIpAddress.#",
			"Ipv4PrefixCount", "Ipv4Prefix.#", "AllowReassignment"},
		mutates: true,
		run:     (*Sim).assignPrivateIPAddresses,
	},
	"UnassignPrivateIpAddresses": {
		params:  []string{"NetworkInterfaceId", "PrivateIpAddress.#", "Ipv4Prefix.#"},
		mutates: true,
		run:     (*Sim).unassignPrivateIPAddresses,
	},
	"AssignIpv6Addresses": {
		params:  []string{"NetworkInterfaceId", "Ipv6AddressCount", "Ipv6Addresses.#", "Ipv6PrefixCount", "Ipv6Prefix.#"},
		mutates: true,
		run:     (*Sim).assignIPv6Addresses,
	},
	"UnassignIpv6Addresses": {
		params:  []string{"NetworkInterfaceId", "Ipv6Addresses.#", "Ipv6Prefix.#"},
		mutates: true,
		run:     (*Sim).unassignIPv6Addresses,
	},
	"CreateTags": {
		params:  []string{"ResourceId.#", "Tag.#.Key", "Tag.#.Value"},
		mutates: true,
		run:     (*Sim).createTags,
	},
}

// Actions lists the EC2 actions the simulator implements, sorted.
func Actions() []string {
	out := make([]string, 0, len(actions))
	for a := range actions {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}

// serveEC2 answers one EC2 Query request and logs it.
func (s *Sim) serveEC2(w http.ResponseWriter, r *http.Request) {
	reqID := s.newRequestID()
	var action string
	var resp response
	var apiErr *APIError
	switch {
	case r.Method != http.MethodPost:
		apiErr = newError(CodeUnsupportedHTTPVerb, "ec2sim accepts only POST requests with a form body")
	default:
		if err := r.ParseForm(); err != nil {
			apiErr = newError(CodeInvalidParameterValue, "Malformed request body: %v", err)
			break
		}
		action = r.PostForm.Get("Action")
	}
	start := time.Now() // the request body has been read
	if apiErr == nil {
		resp, apiErr = s.handleEC2(r.Context(), action, params{r.PostForm})
	}

	call := Call{Time: start, Action: action, Attempt: sdkAttempt(r.Header.Get("Amz-Sdk-Request"))}
	var body []byte
	var status int
	if apiErr != nil {
		call.ErrorCode = apiErr.Code
		status = apiErr.Status
		body = encodeXML("Response", "", &xmlErrorResponse{
			Errors:    []xmlError{{Code: apiErr.Code, Message: apiErr.Message}},
			RequestID: reqID,
		})
	} else {
		resp.setRequestID(reqID)
		status = http.StatusOK
		body = encodeXML(action+"Response", ec2Namespace, resp)
	}
	if d := minTurnaround - time.Since(start); d > 0 {
		time.Sleep(d)
	}
	s.log.add(call)
	s.logger.Debug("ec2sim: EC2 call", "action", action, "error", call.ErrorCode, "status", status)

	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.Header().Set("X-Amzn-RequestId", reqID)
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// handleEC2 validates, applies faults and dispatches one request.
func (s *Sim) handleEC2(ctx context.Context, action string, p params) (response, *APIError) {
	if d := s.cfg.Latency; d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, newError(CodeInternalError, "request cancelled")
		}
	}
	if action == "" {
		return nil, errMissing("Action")
	}
	def, ok := actions[action]
	if !ok {
		return nil, newError(CodeInvalidAction, "The action %s is not valid for this web service.", action)
	}
	if err := s.faults.pickFault(action); err != nil {
		return nil, err
	}
	version, ok := p.get("Version")
	if !ok {
		return nil, errMissing("Version")
	}
	if version != apiVersion {
		return nil, errBadValue("Version", version, "ec2sim implements only API version "+apiVersion+".")
	}
	keys := make([]string, 0, len(p.v))
	for key := range p.v {
		keys = append(keys, key)
	}
	sort.Strings(keys) // report the same unknown parameter every time
	for _, key := range keys {
		switch key {
		case "Action", "Version", "DryRun":
			continue
		}
		if !allowedParam(key, def.params) {
			return nil, newError(CodeUnknownParameter, "The parameter %s is not recognized (or not modelled by ec2sim) for %s", key, action)
		}
	}
	dryRun, _, err := p.boolean("DryRun")
	if err != nil {
		return nil, asAPIError(err)
	}
	if dryRun {
		return nil, newError(CodeDryRunOperation, "Request would have succeeded, but DryRun flag is set.")
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	s.advanceLocked(now)
	resp, err := def.run(s, p, now)
	if err != nil {
		return nil, asAPIError(err)
	}
	if def.mutates {
		s.advanceLocked(now) // zero-delay attachment changes complete at once
		s.recordLocked(now)
	}
	return resp, nil
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

func (s *Sim) newRequestID() string {
	n := s.reqSeq.Add(1)
	return fmt.Sprintf("5e1a0000-0000-4000-8000-%012x", n)
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
