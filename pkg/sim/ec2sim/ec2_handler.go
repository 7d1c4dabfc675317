package ec2sim

import (
	"context"
	"sort"
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
			"SecondaryPrivateIpAddressCount", "Ipv4PrefixCount", "ClientToken", "InterfaceType",
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
	"AssociateTrunkInterface": {
		params:  []string{"BranchInterfaceId", "TrunkInterfaceId", "VlanId", "GreKey", "ClientToken"},
		mutates: true,
		run:     (*Sim).associateTrunkInterface,
	},
	"DisassociateTrunkInterface": {
		params:  []string{"AssociationId", "ClientToken"},
		mutates: true,
		run:     (*Sim).disassociateTrunkInterface,
	},
	"DescribeTrunkInterfaceAssociations": {
		params: append([]string{"AssociationId.#", "MaxResults", "NextToken"}, filterParams...),
		run:    (*Sim).describeTrunkInterfaceAssociations,
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

// handleEC2 applies the request limits, the latency and the faults, then
// validates and dispatches one request. A request of an implemented
// action meets the limits first, as at EC2's front door: a throttled one
// waits for nothing, draws no fault and changes nothing. Neither the
// limits nor the latency wait hold s.mu.
func (s *Sim) handleEC2(ctx context.Context, action string, p params) (response, gate, *APIError) {
	def, known := actions[action]
	g := gateNone
	if known && s.front.limiter != nil {
		if g = s.front.limiter.admit(action, p.v); g == gateThrottled {
			return nil, g, errThrottled()
		}
	}
	resp, err := s.dispatchEC2(ctx, action, def, known, p)
	return resp, g, err
}

func (s *Sim) dispatchEC2(ctx context.Context, action string, def actionDef, known bool, p params) (response, *APIError) {
	if d := s.front.latency.of(action); d > 0 {
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
	if !known {
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
