package envinventory

import (
	"errors"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/envutil"
)

// base is the least environment ipamd starts with (the chart sets it).
func base() map[string]string { return map[string]string{"ENABLE_IPv4": "true"} }

// loadIPAMD runs ipamd's configuration loader on env and says which
// variables it looked up.
func loadIPAMD(env map[string]string) (ipamd.Config, map[string]bool, error) {
	read := map[string]bool{}
	cfg, err := ipamd.Load(envutil.Env{
		Lookup: func(k string) (string, bool) { read[k] = true; v, ok := env[k]; return v, ok },
		Warn:   func(name, value, used string) {},
	})
	return cfg, read, err
}

func with(name, value string) map[string]string {
	env := base()
	env[name] = value
	return env
}

// The list itself is coherent: every variable has a status that says
// what happens to it, so none can be silently ignored.
func TestEveryVariableHasAStatusThatSaysWhatHappens(t *testing.T) {
	seen := map[string]bool{}
	for _, v := range All {
		assert.False(t, seen[v.Name], "%s listed twice", v.Name)
		seen[v.Name] = true
		switch v.Status {
		case Honoured, New:
			assert.NotEmpty(t, v.ReadBy, "%s is honoured but no component reads it", v.Name)
		case Refused:
			assert.True(t, v.Reads(IPAMD), "%s is refused, which ipamd must do", v.Name)
			assert.NotEmpty(t, v.Sample, "%s needs a value to refuse", v.Name)
		case Inert:
			g, ok := Lookup(v.Gate)
			// It may be read (the entrypoint fills the egress log file
			// into the conflist), but acts only in its gate's mode.
			assert.True(t, ok && g.Status == Refused, "%s is inert only if its gate %q is refused", v.Name, v.Gate)
		case NotReadUpstream:
			assert.True(t, v.Upstream, v.Name)
			assert.Empty(t, v.ReadBy, v.Name)
		default:
			t.Errorf("%s has no status", v.Name)
		}
		if v.Status == New {
			assert.False(t, v.Upstream, v.Name)
		}
	}
}

// ipamd looks up every variable the list says it reads, a changed value
// changes the configuration it loads, and it reads nothing the list does
// not know.
func TestIPAMDReadsWhatTheListSays(t *testing.T) {
	def, read, err := loadIPAMD(base())
	require.NoError(t, err)
	for _, v := range All {
		if !v.Reads(IPAMD) {
			continue
		}
		assert.True(t, read[v.Name], "ipamd never looks up %s", v.Name)
		if (v.Status == Honoured || v.Status == New) && v.Sample != "" {
			cfg, _, err := loadIPAMD(with(v.Name, v.Sample))
			if assert.NoError(t, err, "%s=%s", v.Name, v.Sample) {
				assert.NotEqual(t, def, cfg, "%s=%s changes nothing in ipamd's configuration", v.Name, v.Sample)
			}
		}
	}
	for name := range read {
		v, ok := Lookup(name)
		if !ok || !v.Reads(IPAMD) {
			t.Errorf("ipamd reads %s, which the list does not say it reads: add it (and to docs/upgrade.md)", name)
		}
	}
}

// A refused variable set to a value this build cannot honour stops ipamd
// with an error that names it and says it is not supported.
func TestRefusedVariablesStopIPAMD(t *testing.T) {
	for _, v := range All {
		if v.Status != Refused {
			continue
		}
		_, _, err := loadIPAMD(with(v.Name, v.Sample))
		if assert.Error(t, err, "%s=%s", v.Name, v.Sample) {
			assert.Contains(t, err.Error(), v.Name)
			assert.True(t, errors.Is(err, ipamd.ErrUnsupported), "%s: %v", v.Name, err)
		}
	}
}

// ipamd's booleans treat a set but empty value as upstream's helper for
// each does: a warning for the stricter one, silence for the others.
func TestIPAMDEmptyBooleans(t *testing.T) {
	for _, v := range All {
		isBool := v.Sample == "true" || v.Sample == "false" || v.Name == "ENABLE_IPv4"
		if !isBool || !v.Reads(IPAMD) {
			continue
		}
		env := with(v.Name, "")
		if v.Name == "ENABLE_IPv4" {
			env = map[string]string{"ENABLE_IPv4": ""}
		}
		var warned []string
		_, _ = ipamd.Load(envutil.Env{
			Lookup: func(k string) (string, bool) { x, ok := env[k]; return x, ok },
			Warn:   func(name, value, used string) { warned = append(warned, name) },
		})
		if EmptyWarns[v.Name] {
			assert.Equal(t, []string{v.Name}, warned, "%s= (empty) should be warned about", v.Name)
		} else {
			assert.Empty(t, warned, "%s= (empty) is unset, silently", v.Name)
		}
	}
}

// docRow is one row of docs/upgrade.md's environment table.
type docRow struct{ name, status string }

var rowRE = regexp.MustCompile("^\\|\\s*`([A-Za-z0-9_]+)`\\s*\\|([^|]*)\\|")

// docTable reads the rows of the table under "## Environment variables".
func docTable(t *testing.T) []docRow {
	b, err := os.ReadFile("../../docs/upgrade.md")
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(b), "\n## Environment variables\n")
	require.True(t, ok, "docs/upgrade.md has no \"## Environment variables\" section")
	if i := strings.Index(section, "\n## "); i >= 0 {
		section = section[:i]
	}
	var rows []docRow
	for _, line := range strings.Split(section, "\n") {
		if m := rowRE.FindStringSubmatch(line); m != nil {
			rows = append(rows, docRow{m[1], strings.TrimSpace(m[2])})
		}
	}
	return rows
}

// docs/upgrade.md lists every variable of the list, once, with the same
// status, and nothing else.
func TestUpgradeDocListsEveryVariable(t *testing.T) {
	rows := docTable(t)
	documented := map[string]string{}
	for _, r := range rows {
		_, dup := documented[r.name]
		assert.False(t, dup, "%s documented twice", r.name)
		documented[r.name] = r.status
		if _, ok := Lookup(r.name); !ok {
			t.Errorf("docs/upgrade.md lists %s, which the list does not know", r.name)
		}
	}
	var missing []string
	for _, v := range All {
		status, ok := documented[v.Name]
		if !ok {
			missing = append(missing, v.Name)
			continue
		}
		assert.True(t, strings.HasPrefix(status, v.Status.Doc()),
			"%s: docs/upgrade.md says %q, the list %q", v.Name, status, v.Status.Doc())
		if v.Status == Refused {
			assert.Regexp(t, `^refused: \S`, status, "%s: say why it is refused", v.Name)
		}
	}
	sort.Strings(missing)
	assert.Empty(t, missing, "docs/upgrade.md does not list these variables")
}
