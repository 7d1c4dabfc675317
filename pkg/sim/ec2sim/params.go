package ec2sim

import (
	"net/netip"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

var itoa = strconv.Itoa

// params reads EC2 Query parameters. Lists are flattened with 1-based
// indexes: Name.1, Name.2, ...; structures use dotted members:
// Filter.1.Name, Filter.1.Value.1.
type params struct{ v url.Values }

// get returns a parameter; present is false if it is absent or empty.
func (p params) get(name string) (string, bool) {
	v := p.v.Get(name)
	return v, v != ""
}

func (p params) has(name string) bool { _, ok := p.v[name]; return ok }

func (p params) required(name string) (string, error) {
	v, ok := p.get(name)
	if !ok {
		return "", errMissing(name)
	}
	return v, nil
}

// integer parses an optional integer parameter.
func (p params) integer(name string) (n int, present bool, err error) {
	v, ok := p.get(name)
	if !ok {
		return 0, false, nil
	}
	n, convErr := strconv.Atoi(v)
	if convErr != nil {
		return 0, true, errBadValue(name, v, "Expected an integer.")
	}
	return n, true, nil
}

// boolean parses an optional boolean parameter.
func (p params) boolean(name string) (b bool, present bool, err error) {
	v, ok := p.get(name)
	if !ok {
		return false, false, nil
	}
	switch v {
	case "true":
		return true, true, nil
	case "false":
		return false, true, nil
	}
	return false, true, errBadValue(name, v, "Expected true or false.")
}

// indexes returns the distinct list indexes N used under prefix (keys
// "prefix.N" or "prefix.N.member"), sorted.
func (p params) indexes(prefix string) []int {
	seen := map[int]bool{}
	for k := range p.v {
		rest, ok := strings.CutPrefix(k, prefix+".")
		if !ok {
			continue
		}
		idx, _, _ := strings.Cut(rest, ".")
		if n, err := strconv.Atoi(idx); err == nil && n > 0 {
			seen[n] = true
		}
	}
	out := make([]int, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Ints(out)
	return out
}

// list returns the values of the flattened list prefix.1, prefix.2, ...
func (p params) list(prefix string) []string {
	var out []string
	for _, n := range p.indexes(prefix) {
		if v := p.v.Get(prefix + "." + itoa(n)); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// addrList parses a list of IPv4 addresses.
func (p params) addrList(prefix string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, v := range p.list(prefix) {
		a, err := netip.ParseAddr(v)
		if err != nil || !a.Is4() {
			return nil, errBadValue(prefix, v, "Expected an IPv4 address.")
		}
		if !containsAddr(out, a) {
			out = append(out, a)
		}
	}
	return out, nil
}

// prefixList parses a list of IPv4 /28 prefixes.
func (p params) prefixList(prefix string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, v := range p.list(prefix) {
		pf, err := netip.ParsePrefix(v)
		if err != nil || !pf.Addr().Is4() || pf.Bits() != prefixLen || pf.Masked() != pf {
			return nil, errBadValue(prefix, v, "Expected an IPv4 /28 prefix.")
		}
		out = append(out, pf)
	}
	return out, nil
}

type tag struct{ key, value string }

// tags parses prefix.N.Key / prefix.N.Value pairs.
func (p params) tags(prefix string) ([]tag, error) {
	var out []tag
	for _, n := range p.indexes(prefix) {
		base := prefix + "." + itoa(n)
		key, ok := p.get(base + ".Key")
		if !ok {
			return nil, errMissing(base + ".Key")
		}
		if err := validTag(key, p.v.Get(base+".Value")); err != nil {
			return nil, err
		}
		out = append(out, tag{key, p.v.Get(base + ".Value")})
	}
	return out, nil
}

func validTag(key, value string) error {
	switch {
	case len(key) > 128:
		return errBadValue("Tag.Key", key, "Tag keys are at most 128 characters.")
	case len(value) > 256:
		return errBadValue("Tag.Value", value, "Tag values are at most 256 characters.")
	case strings.HasPrefix(strings.ToLower(key), "aws:"):
		return errBadValue("Tag.Key", key, "Tag keys starting with 'aws:' are reserved for internal use.")
	}
	return nil
}

type filter struct {
	name   string
	values []string
}

// filters parses Filter.N.Name / Filter.N.Value.M and checks each name is
// supported: known names, or "tag:<key>" when allowTags.
func (p params) filters(known map[string]bool, allowTags bool) ([]filter, error) {
	var out []filter
	for _, n := range p.indexes("Filter") {
		base := "Filter." + itoa(n)
		name, ok := p.get(base + ".Name")
		if !ok {
			return nil, errMissing(base + ".Name")
		}
		isTag := allowTags && strings.HasPrefix(name, "tag:") && len(name) > 4
		if !known[name] && !isTag {
			return nil, newError(CodeInvalidParameterValue, "The filter '%s' is invalid", name)
		}
		values := p.list(base + ".Value")
		if len(values) == 0 {
			return nil, newError(CodeInvalidParameterValue, "The filter '%s' requires at least one value", name)
		}
		out = append(out, filter{name: name, values: values})
	}
	return out, nil
}

// matchFilters reports whether a resource passes every filter; attr
// returns the resource's values for a filter name. Values may use the EC2
// wildcards * and ?.
func matchFilters(fs []filter, attr func(name string) []string) bool {
	for _, f := range fs {
		have := attr(f.name)
		hit := false
		for _, want := range f.values {
			for _, h := range have {
				if globMatch(want, h) {
					hit = true
				}
			}
		}
		if !hit {
			return false
		}
	}
	return true
}

// tagFilterValues answers the tag-key and tag:<key> filters.
func tagFilterValues(tags map[string]string, name string) ([]string, bool) {
	if name == "tag-key" {
		keys := make([]string, 0, len(tags))
		for k := range tags {
			keys = append(keys, k)
		}
		return keys, true
	}
	if k, ok := strings.CutPrefix(name, "tag:"); ok {
		if v, ok := tags[k]; ok {
			return []string{v}, true
		}
		return nil, true
	}
	return nil, false
}

// globMatch matches s against a pattern where * is any run and ? any one
// character.
func globMatch(pattern, s string) bool {
	for len(pattern) > 0 {
		switch pattern[0] {
		case '*':
			for i := len(s); i >= 0; i-- {
				if globMatch(pattern[1:], s[i:]) {
					return true
				}
			}
			return false
		case '?':
			if s == "" {
				return false
			}
			pattern, s = pattern[1:], s[1:]
		default:
			if s == "" || s[0] != pattern[0] {
				return false
			}
			pattern, s = pattern[1:], s[1:]
		}
	}
	return s == ""
}

// allowedParam reports whether key matches one of the patterns, where a
// "#" segment matches a positive list index.
func allowedParam(key string, patterns []string) bool {
	ks := strings.Split(key, ".")
	for _, pat := range patterns {
		ps := strings.Split(pat, ".")
		if len(ps) != len(ks) {
			continue
		}
		ok := true
		for i := range ps {
			if ps[i] == "#" {
				if n, err := strconv.Atoi(ks[i]); err != nil || n < 1 || ks[i][0] == '0' || ks[i][0] == '+' {
					ok = false
				}
			} else if ps[i] != ks[i] {
				ok = false
			}
		}
		if ok {
			return true
		}
	}
	return false
}

func containsAddr(list []netip.Addr, a netip.Addr) bool {
	for _, x := range list {
		if x == a {
			return true
		}
	}
	return false
}
