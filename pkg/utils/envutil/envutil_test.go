package envutil

import (
	"bytes"
	"errors"
	"log/slog"
	"math"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const name = "TEST_VAR"

// warning is one call of Warn.
type warning struct{ name, value, used string }

// envWith returns an Env holding TEST_VAR=v (unset when set is false)
// and the warnings it records.
func envWith(v string, set bool) (Env, *[]warning) {
	var got []warning
	return Env{
		Lookup: func(k string) (string, bool) {
			if k == name && set {
				return v, true
			}
			return "", false
		},
		Warn: func(n, v, u string) { got = append(got, warning{n, v, u}) },
	}, &got
}

// in is a getter's input: TEST_VAR's value, or unset.
type in struct {
	v   string
	set bool
}

var unset = in{}

func val(v string) in { return in{v, true} }

// warned is the one warning a case expects; nil means none.
func warned(value, used string) []warning { return []warning{{name, value, used}} }

func TestValue(t *testing.T) {
	for _, tc := range []struct {
		in   in
		want string
		ok   bool
	}{
		{unset, "", false},
		{val(""), "", false},
		{val(" \t"), "", false},
		{val(" x "), "x", true},
	} {
		env, w := envWith(tc.in.v, tc.in.set)
		got, ok := env.Value(name)
		assert.Equal(t, tc.want, got, "%+v", tc.in)
		assert.Equal(t, tc.ok, ok, "%+v", tc.in)
		assert.Empty(t, *w)
	}
}

func TestString(t *testing.T) {
	for _, tc := range []struct {
		in   in
		want string
	}{
		{unset, "def"},
		{val(""), "def"},
		{val("x"), "x"},
		{val(" x "), " x "}, // as set: paths and prefixes are not trimmed
	} {
		env, w := envWith(tc.in.v, tc.in.set)
		assert.Equal(t, tc.want, env.String(name, "def"), "%+v", tc.in)
		assert.Empty(t, *w)
	}
}

func TestBool(t *testing.T) {
	for _, tc := range []struct {
		in   in
		def  bool
		want bool
		warn []warning
	}{
		{unset, true, true, nil},
		{unset, false, false, nil},
		{val(""), true, true, nil},
		{val("  "), false, false, nil},
		{val("true"), false, true, nil},
		{val("1"), false, true, nil},
		{val("T"), false, true, nil},
		{val("TRUE"), false, true, nil},
		{val(" true "), false, true, nil},
		{val("false"), true, false, nil},
		{val("0"), true, false, nil},
		{val("f"), true, false, nil},
		{val("yes"), false, false, warned("yes", "false")},
		{val("on"), true, true, warned("on", "true")},
		{val("tru e"), true, true, warned("tru e", "true")},
	} {
		env, w := envWith(tc.in.v, tc.in.set)
		assert.Equal(t, tc.want, env.Bool(name, tc.def), "%+v", tc.in)
		assert.Equal(t, tc.warn, *w, "%+v", tc.in)
	}
}

func TestInt(t *testing.T) {
	for _, tc := range []struct {
		in       in
		def, min int
		want     int
		warn     []warning
	}{
		{unset, 1, 0, 1, nil},
		{val(""), 1, 0, 1, nil},
		{val(" "), 1, 0, 1, nil},
		{val("5"), 1, 0, 5, nil},
		{val(" 5 "), 1, 0, 5, nil},
		{val("+5"), 1, 0, 5, nil},
		{val("0"), 1, 0, 0, nil},
		{val("-1"), 1, 0, 1, warned("-1", "1")},
		{val("-7"), -1, math.MinInt, -7, nil},
		{val("1e3"), 9001, 1, 9001, warned("1e3", "9001")},
		{val("0x10"), 2, 0, 2, warned("0x10", "2")},
		{val("jumbo"), 9001, 1, 9001, warned("jumbo", "9001")},
		{val("99999999999999999999"), 3, 0, 3, warned("99999999999999999999", "3")},
	} {
		env, w := envWith(tc.in.v, tc.in.set)
		assert.Equal(t, tc.want, env.Int(name, tc.def, tc.min), "%+v", tc.in)
		assert.Equal(t, tc.warn, *w, "%+v", tc.in)
	}
}

func TestUint32(t *testing.T) {
	for _, tc := range []struct {
		in       in
		def, min uint32
		want     uint32
		warn     []warning
	}{
		{unset, 0x80, 1, 0x80, nil},
		{val(""), 0x80, 1, 0x80, nil},
		{val("256"), 0x80, 1, 256, nil},
		{val("0x100000"), 0x80, 1, 0x100000, nil},
		{val("0200"), 0x80, 1, 0x80, nil}, // octal
		{val("0o10"), 0x80, 1, 8, nil},
		{val("0b11"), 0x80, 1, 3, nil},
		{val("+0x40"), 0x80, 1, 0x40, nil},
		{val(" 0x40 "), 0x80, 1, 0x40, nil},
		{val("0xffffffff"), 0x80, 1, math.MaxUint32, nil},
		{val("0"), 0x80, 0, 0, nil},
		{val("0"), 0x80, 1, 0x80, warned("0", "128")},
		{val("-1"), 0x80, 0, 0x80, warned("-1", "128")},
		{val("0x100000000"), 0x80, 1, 0x80, warned("0x100000000", "128")},
		{val("mark"), 0x80, 1, 0x80, warned("mark", "128")},
	} {
		env, w := envWith(tc.in.v, tc.in.set)
		assert.Equal(t, tc.want, env.Uint32(name, tc.def, tc.min), "%+v", tc.in)
		assert.Equal(t, tc.warn, *w, "%+v", tc.in)
	}
}

func TestDuration(t *testing.T) {
	for _, tc := range []struct {
		in   in
		want time.Duration
		warn []warning
	}{
		{unset, time.Minute, nil},
		{val(""), time.Minute, nil},
		{val("90s"), 90 * time.Second, nil},
		{val(" 5m "), 5 * time.Minute, nil},
		{val("1h30m"), 90 * time.Minute, nil},
		{val("1s"), time.Second, nil}, // the floor itself
		{val("500ms"), time.Minute, warned("500ms", "1m0s")},
		{val("0"), time.Minute, warned("0", "1m0s")},
		{val("30"), time.Minute, warned("30", "1m0s")}, // no unit
		{val("soon"), time.Minute, warned("soon", "1m0s")},
	} {
		env, w := envWith(tc.in.v, tc.in.set)
		assert.Equal(t, tc.want, env.Duration(name, time.Minute, time.Second), "%+v", tc.in)
		assert.Equal(t, tc.warn, *w, "%+v", tc.in)
	}
}

func TestOneOf(t *testing.T) {
	for _, tc := range []struct {
		in   in
		want string
		warn []warning
	}{
		{unset, "prng", nil},
		{val(""), "prng", nil},
		{val("prng"), "prng", nil},
		{val("none"), "none", nil},
		{val(" hashrandom "), "hashrandom", nil},
		{val("None"), "prng", warned("None", "prng")}, // exact, as upstream
		{val("random"), "prng", warned("random", "prng")},
	} {
		env, w := envWith(tc.in.v, tc.in.set)
		assert.Equal(t, tc.want, env.OneOf(name, "prng", "prng", "hashrandom", "none"), "%+v", tc.in)
		assert.Equal(t, tc.warn, *w, "%+v", tc.in)
	}
}

func TestList(t *testing.T) {
	for _, tc := range []struct {
		in   in
		want []string
	}{
		{unset, nil},
		{val(""), nil},
		{val(" , ,"), nil},
		{val("a"), []string{"a"}},
		{val(" a , b,,c "), []string{"a", "b", "c"}},
	} {
		env, w := envWith(tc.in.v, tc.in.set)
		assert.Equal(t, tc.want, env.List(name), "%+v", tc.in)
		assert.Empty(t, *w)
	}
}

func TestStringMap(t *testing.T) {
	for _, tc := range []struct {
		in   in
		want map[string]string
		warn []warning
	}{
		{unset, nil, nil},
		{val("  "), nil, nil},
		{val("{}"), map[string]string{}, nil},
		{val(` {"team":"net", "k8s.amazonaws.com/x":"y"} `), map[string]string{"team": "net", "k8s.amazonaws.com/x": "y"}, nil},
		{val(`{"team":1}`), nil, warned(`{"team":1}`, "{}")},
		{val(`team=net`), nil, warned("team=net", "{}")},
		{val(`["a"]`), nil, warned(`["a"]`, "{}")},
		{val(`null`), nil, warned("null", "{}")},
	} {
		env, w := envWith(tc.in.v, tc.in.set)
		assert.Equal(t, tc.want, env.StringMap(name), "%+v", tc.in)
		assert.Equal(t, tc.warn, *w, "%+v", tc.in)
	}
}

func TestPrefixes(t *testing.T) {
	p := netip.MustParsePrefix
	for _, tc := range []struct {
		in   in
		want []netip.Prefix
		warn []warning
	}{
		{unset, nil, nil},
		{val(""), nil, nil},
		{val("10.1.0.0/16, 192.168.5.7/24,,"), []netip.Prefix{p("10.1.0.0/16"), p("192.168.5.0/24")}, nil},
		{val("fd00::1/8"), []netip.Prefix{p("fd00::/8")}, nil},
		{val("bogus,10.2.0.0/16,10.3.0.0,300.0.0.0/8"), []netip.Prefix{p("10.2.0.0/16")}, []warning{
			{name, "bogus", EntrySkipped}, {name, "10.3.0.0", EntrySkipped}, {name, "300.0.0.0/8", EntrySkipped}}},
	} {
		env, w := envWith(tc.in.v, tc.in.set)
		assert.Equal(t, tc.want, env.Prefixes(name), "%+v", tc.in)
		assert.Equal(t, tc.warn, *w, "%+v", tc.in)
	}
}

func TestLookupInt(t *testing.T) {
	for _, tc := range []struct {
		in       in
		min, max int
		want     int
		ok       bool
		err      string
	}{
		{unset, 576, 9001, 0, false, ""},
		{val(""), 576, 9001, 0, false, ""},
		{val(" "), 576, 9001, 0, false, ""},
		{val("1500"), 576, 9001, 1500, true, ""},
		{val(" 576 "), 576, 9001, 576, true, ""},
		{val("9001"), 576, 9001, 9001, true, ""},
		{val("575"), 576, 9001, 0, true, `TEST_VAR "575" must be an integer between 576 and 9001`},
		{val("9002"), 576, 9001, 0, true, `TEST_VAR "9002" must be an integer between 576 and 9001`},
		{val("jumbo"), 576, 9001, 0, true, `TEST_VAR "jumbo" must be an integer between 576 and 9001`},
		{val("0"), 0, math.MaxInt, 0, true, ""},
		{val("-1"), 0, math.MaxInt, 0, true, `TEST_VAR "-1" must be an integer >= 0`},
		{val("30s"), 0, math.MaxInt, 0, true, `TEST_VAR "30s" must be an integer >= 0`},
	} {
		env, w := envWith(tc.in.v, tc.in.set)
		n, ok, err := env.LookupInt(name, tc.min, tc.max)
		assert.Equal(t, tc.want, n, "%+v", tc.in)
		assert.Equal(t, tc.ok, ok, "%+v", tc.in)
		if tc.err == "" {
			assert.NoError(t, err, "%+v", tc.in)
		} else {
			assert.EqualError(t, err, tc.err, "%+v", tc.in)
			var re *RangeError
			require.True(t, errors.As(err, &re))
			assert.Equal(t, name, re.Name)
		}
		assert.Empty(t, *w, "LookupInt never warns")
	}
}

func TestSlogWarn(t *testing.T) {
	var buf bytes.Buffer
	SlogWarn(slog.New(slog.NewTextHandler(&buf, nil)))("AWS_VPC_ENI_MTU", "jumbo", "9001")
	assert.Contains(t, buf.String(), "level=WARN")
	assert.Contains(t, buf.String(), "env=AWS_VPC_ENI_MTU value=jumbo using=9001")
}

// The zero Env reads the process environment and warns through
// slog.Default(); String reads through the Lookup it is given.
func TestZeroEnvAndPackageFunctions(t *testing.T) {
	var buf bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
	t.Cleanup(func() { slog.SetDefault(old) })

	t.Setenv("ENVUTIL_TEST_BOOL", "nope")
	t.Setenv("ENVUTIL_TEST_INT", " 7 ")
	var env Env
	assert.True(t, env.Bool("ENVUTIL_TEST_BOOL", true))
	assert.Contains(t, buf.String(), "env=ENVUTIL_TEST_BOOL value=nope using=true")
	assert.Equal(t, 7, env.Int("ENVUTIL_TEST_INT", 1, 0))
	assert.Equal(t, "x", env.String("ENVUTIL_TEST_UNSET", "x"))

	m := map[string]string{"S": "s"}
	lookup := Lookup(func(k string) (string, bool) { v, ok := m[k]; return v, ok })
	assert.Equal(t, "s", String(lookup, "S", "d"))
	assert.Equal(t, "d", String(lookup, "X", "d"))
}

// StrictBool differs from Bool only for a variable set to the empty
// string or blanks: upstream's stricter helper complains about it.
func TestStrictBool(t *testing.T) {
	for _, tc := range []struct {
		in   in
		def  bool
		want bool
		warn []warning
	}{
		{unset, true, true, nil},
		{val(""), true, true, warned("", "true")},
		{val("  "), false, false, warned("  ", "false")},
		{val("true"), false, true, nil},
		{val(" 0 "), true, false, nil},
		{val("yes"), false, false, warned("yes", "false")},
	} {
		env, w := envWith(tc.in.v, tc.in.set)
		assert.Equal(t, tc.want, env.StrictBool(name, tc.def), "%+v", tc.in)
		assert.Equal(t, tc.warn, *w, "%+v", tc.in)
	}
}

func TestIntIn(t *testing.T) {
	for _, tc := range []struct {
		in   in
		want int
		warn []warning
	}{
		{unset, 9001, nil},
		{val(""), 9001, nil},
		{val("576"), 576, nil},
		{val(" 9001 "), 9001, nil},
		{val("1500"), 1500, nil},
		{val("575"), 9001, warned("575", "9001")},
		{val("9002"), 9001, warned("9002", "9001")},
		{val("jumbo"), 9001, warned("jumbo", "9001")},
	} {
		env, w := envWith(tc.in.v, tc.in.set)
		assert.Equal(t, tc.want, env.IntIn(name, 9001, 576, 9001), "%+v", tc.in)
		assert.Equal(t, tc.warn, *w, "%+v", tc.in)
	}
}

func TestSeconds(t *testing.T) {
	for _, tc := range []struct {
		in   in
		want time.Duration
		warn []warning
	}{
		{unset, 30 * time.Second, nil},
		{val(" "), 30 * time.Second, nil},
		{val("0"), 0, nil},
		{val("5"), 5 * time.Second, nil},
		{val("-1"), 30 * time.Second, warned("-1", "30s")},
		{val("5s"), 30 * time.Second, warned("5s", "30s")},
		{val("1.5"), 30 * time.Second, warned("1.5", "30s")},
		{val("9999999999999"), 30 * time.Second, warned("9999999999999", "30s")},
	} {
		env, w := envWith(tc.in.v, tc.in.set)
		assert.Equal(t, tc.want, env.Seconds(name, 30*time.Second, 0), "%+v", tc.in)
		assert.Equal(t, tc.warn, *w, "%+v", tc.in)
	}
}

func TestReject(t *testing.T) {
	env, w := envWith("", false)
	env.Reject(name, "fd00::/8", EntrySkipped)
	assert.Equal(t, warned("fd00::/8", EntrySkipped), *w)
}

func TestHeldReplaysInOrder(t *testing.T) {
	var h Held
	env := Env{Lookup: func(k string) (string, bool) { return map[string]string{"A": "x", "B": "y"}[k], true }, Warn: h.Warn}
	env.Bool("A", true)
	env.Int("B", 3, 0)
	var got []warning
	h.Replay(func(n, v, u string) { got = append(got, warning{n, v, u}) })
	assert.Equal(t, []warning{{"A", "x", "true"}, {"B", "y", "3"}}, got)
	h.Replay(func(n, v, u string) { t.Errorf("replayed twice: %s", n) })
}
