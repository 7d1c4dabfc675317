package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// conflistName is both the template's name in the working directory and
// the file written into the host's CNI configuration directory.
const conflistName = "10-aws.conflist"

// placeholderRE matches the template's __NAME__ placeholders.
var placeholderRE = regexp.MustCompile(`__[A-Z][A-Z0-9]*__`)

// The egress plugin's host-local IPAM, per kind of cluster (upstream's
// values): IPv4 egress in an IPv6 cluster, IPv6 egress in an IPv4 one.
type egressIPAM struct{ subnet, dst, dataDir string }

var (
	egressIPAMv4 = egressIPAM{subnet: "169.254.172.0/22", dst: "0.0.0.0/0", dataDir: "/run/cni/v6pd/egress-v4-ipam"}
	egressIPAMv6 = egressIPAM{subnet: "fd00::ac:00/118", dst: "::/0", dataDir: "/run/cni/v4pd/egress-v6-ipam"}
)

// placeholders maps each placeholder this image fills to its value.
func placeholders(s settings) map[string]string {
	egress := egressIPAMv6
	if s.IPv6 {
		egress = egressIPAMv4
	}
	return map[string]string{
		"__VETHPREFIX__":              s.VethPrefix,
		"__MTU__":                     fmt.Sprint(s.MTU),
		"__PODSGENFORCINGMODE__":      s.PodSGMode,
		"__PLUGINLOGFILE__":           s.PluginLogFile,
		"__PLUGINLOGLEVEL__":          s.PluginLogLevel,
		"__EGRESSPLUGINLOGFILE__":     s.EgressPluginLogFile,
		"__EGRESSPLUGINENABLED__":     strconv.FormatBool(s.EgressEnabled),
		"__EGRESSPLUGINIPAMSUBNET__":  egress.subnet,
		"__EGRESSPLUGINIPAMDST__":     egress.dst,
		"__EGRESSPLUGINIPAMDATADIR__": egress.dataDir,
		"__RANDOMIZESNAT__":           s.RandomizeSNAT,
		"__NODEIP__":                  s.NodeIP,
	}
}

// Plugins chained on request, as upstream adds them.
type bandwidthPlugin struct {
	Type         string          `json:"type"`
	Capabilities map[string]bool `json:"capabilities"`
}

type tuningPlugin struct {
	Type   string            `json:"type"`
	Sysctl map[string]string `json:"sysctl"`
}

var (
	bandwidth = bandwidthPlugin{Type: "bandwidth", Capabilities: map[string]bool{"bandwidth": true}}
	tuning    = tuningPlugin{Type: "tuning", Sysctl: map[string]string{
		"net.ipv6.conf.all.disable_ipv6":     "1",
		"net.ipv6.conf.default.disable_ipv6": "1",
		"net.ipv6.conf.lo.disable_ipv6":      "1",
	}}
)

// renderConflist fills the template's placeholders and applies the
// optional edits (cniVersion override, bandwidth and tuning plugins). The
// edits work on the JSON generically: every key the template has, known to
// us or not, survives, in its order. Without edits the filled template is
// returned byte for byte. The result is checked to be a usable conflist.
func renderConflist(tmpl []byte, s settings) ([]byte, error) {
	values := placeholders(s)
	var unknown []string
	for _, p := range placeholderRE.FindAll(tmpl, -1) {
		if _, ok := values[string(p)]; !ok {
			unknown = append(unknown, string(p))
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, fmt.Errorf("template has placeholders this image does not fill: %s", strings.Join(dedup(unknown), ", "))
	}
	// One pass, so a value that happens to contain a placeholder's text is
	// never substituted again.
	out := placeholderRE.ReplaceAllFunc(tmpl, func(p []byte) []byte { return jsonStringContent(values[string(p)]) })

	conf, err := decodeObject(out)
	if err != nil {
		return nil, fmt.Errorf("template is not a valid conflist: %w", err)
	}
	plugins, err := conf.plugins()
	if err != nil {
		return nil, fmt.Errorf("template is not a valid conflist: %w", err)
	}
	changed := false
	if s.CNIVersion != "" && conf.stringValue("cniVersion") != s.CNIVersion {
		conf.set("cniVersion", mustMarshal(s.CNIVersion))
		changed = true
	}
	for _, add := range []struct {
		on     bool
		typ    string
		plugin any
	}{{s.Bandwidth, bandwidth.Type, bandwidth}, {s.DisablePodV6, tuning.Type, tuning}} {
		// A template that already chains the plugin (a custom one mounted
		// over /app/10-aws.conflist) keeps its own settings.
		if add.on && !plugins.has(add.typ) {
			plugins = append(plugins, pluginEntry{typ: add.typ, raw: mustMarshal(add.plugin)})
			changed = true
		}
	}
	if changed {
		conf.set("plugins", plugins.marshal())
		if out, err = conf.marshalIndent(); err != nil {
			return nil, err
		}
	}
	if err := validateConflist(out); err != nil {
		return nil, err
	}
	return out, nil
}

// validateConflist checks what a runtime's libcni needs to load the list.
func validateConflist(b []byte) error {
	conf, err := decodeObject(b)
	if err != nil {
		return fmt.Errorf("rendered conflist is not valid JSON: %w", err)
	}
	for _, k := range []string{"cniVersion", "name"} {
		if conf.stringValue(k) == "" {
			return fmt.Errorf("rendered conflist has no %q string", k)
		}
	}
	if _, err := conf.plugins(); err != nil {
		return fmt.Errorf("rendered conflist: %w", err)
	}
	return nil
}

// jsonStringContent escapes v for use inside a JSON string literal (the
// placeholders sit between quotes in the template).
func jsonStringContent(v string) []byte {
	b := mustMarshal(v)
	return b[1 : len(b)-1]
}

func mustMarshal(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only called on plain strings and the fixed plugin structs
	}
	return b
}

func dedup(sorted []string) []string {
	out := sorted[:0]
	for i, s := range sorted {
		if i == 0 || s != sorted[i-1] {
			out = append(out, s)
		}
	}
	return out
}

// member is one key of a JSON object, value kept verbatim.
type member struct {
	key string
	val json.RawMessage
}

// object is a JSON object with its key order preserved.
type object []member

func decodeObject(b []byte) (object, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if tok != json.Delim('{') {
		return nil, errors.New("top level is not a JSON object")
	}
	var obj object
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key := tok.(string) // object keys are always strings
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return nil, fmt.Errorf("value of %q: %w", key, err)
		}
		if seen[key] {
			return nil, fmt.Errorf("duplicate key %q", key)
		}
		seen[key] = true
		obj = append(obj, member{key, val})
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the top-level object")
	}
	return obj, nil
}

func (o object) get(key string) (json.RawMessage, bool) {
	for _, m := range o {
		if m.key == key {
			return m.val, true
		}
	}
	return nil, false
}

func (o object) stringValue(key string) string {
	raw, ok := o.get(key)
	var s string
	if !ok || json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

func (o *object) set(key string, val json.RawMessage) {
	for i := range *o {
		if (*o)[i].key == key {
			(*o)[i].val = val
			return
		}
	}
	*o = append(*o, member{key, val})
}

func (o object) marshalIndent() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.Write(mustMarshal(m.key))
		buf.WriteByte(':')
		buf.Write(m.val)
	}
	buf.WriteByte('}')
	var out bytes.Buffer
	if err := json.Indent(&out, buf.Bytes(), "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// pluginEntry is one element of "plugins", kept verbatim.
type pluginEntry struct {
	typ string
	raw json.RawMessage
}

type pluginList []pluginEntry

// plugins returns the "plugins" array; each element must be an object with
// a non-empty string "type".
func (o object) plugins() (pluginList, error) {
	raw, ok := o.get("plugins")
	if !ok {
		return nil, errors.New(`no "plugins" list`)
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return nil, errors.New(`"plugins" is not a list`)
	}
	if len(elems) == 0 {
		return nil, errors.New(`"plugins" is empty`)
	}
	list := make(pluginList, 0, len(elems))
	for i, e := range elems {
		p, err := decodeObject(e)
		if err != nil {
			return nil, fmt.Errorf("plugin %d: %w", i, err)
		}
		typ := p.stringValue("type")
		if typ == "" {
			return nil, fmt.Errorf(`plugin %d has no "type"`, i)
		}
		list = append(list, pluginEntry{typ: typ, raw: e})
	}
	return list, nil
}

func (l pluginList) has(typ string) bool {
	for _, p := range l {
		if p.typ == typ {
			return true
		}
	}
	return false
}

func (l pluginList) marshal() json.RawMessage {
	var buf bytes.Buffer
	buf.WriteByte('[')
	for i, p := range l {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.Write(p.raw)
	}
	buf.WriteByte(']')
	return buf.Bytes()
}
