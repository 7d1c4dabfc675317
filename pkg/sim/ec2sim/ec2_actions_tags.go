package ec2sim

import (
	"strings"
	"time"
)

// maxTagsPerResource is EC2's limit on tags per resource.
const maxTagsPerResource = 50

func (s *Sim) createTags(p params, _ time.Time) (response, error) {
	ids := p.list("ResourceId")
	if len(ids) == 0 {
		return nil, errMissing("ResourceId.1")
	}
	tags, err := p.tags("Tag")
	if err != nil {
		return nil, err
	}
	if len(tags) == 0 {
		return nil, errMissing("Tag.1.Key")
	}
	// Resolve everything first so that a bad ID changes nothing.
	var targets []map[string]string
	for _, id := range ids {
		m, err := s.taggable(id)
		if err != nil {
			return nil, err
		}
		n := len(m)
		for _, t := range tags {
			if _, ok := m[t.key]; !ok {
				n++
			}
		}
		if n > maxTagsPerResource {
			return nil, newError(CodeTagLimitExceeded, "The maximum number of tags for resource '%s' (%d) would be exceeded", id, maxTagsPerResource)
		}
		targets = append(targets, m)
	}
	for _, m := range targets {
		for _, t := range tags {
			m[t.key] = t.value
		}
	}
	return &returnResponse{Return: true}, nil
}

// taggable returns the tag map of an ENI, subnet or the instance.
func (s *Sim) taggable(id string) (map[string]string, error) {
	switch {
	case strings.HasPrefix(id, "eni-"):
		e, err := s.lookupENI(id)
		if err != nil {
			return nil, err
		}
		return e.tags, nil
	case strings.HasPrefix(id, "subnet-"):
		sn, err := s.lookupSubnet(id)
		if err != nil {
			return nil, err
		}
		return sn.tags, nil
	case strings.HasPrefix(id, "i-"):
		if err := s.checkInstance(id); err != nil {
			return nil, err
		}
		return s.instance.tags, nil
	}
	return nil, newError(CodeInvalidID, "The ID '%s' is not valid (ec2sim tags ENIs, subnets and the instance)", id)
}
