// Package envutil is the project's one parser of environment variables.
// Every binary reads its settings through it, so a variable read by more
// than one of them (AWS_VPC_ENI_MTU, ENABLE_IPv6, ...) means the same
// thing everywhere.
//
// The rules, per kind, follow upstream aws-node's lenient parsing:
//
//   - unset, empty or blank is the default, silently (StrictBool, for
//     the booleans upstream parses with its stricter helper, warns about
//     a set but empty value);
//   - a value is trimmed of surrounding blanks before it is parsed (String
//     alone returns the value as set);
//   - a value that does not parse, or is out of range, is never an error:
//     the default is used, and Env.Warn is told the variable's name, the
//     value and the value used instead.
//
// Validation that must fail instead of falling back (the entrypoint's)
// uses the Lookup* forms, which return an error naming the variable.
//
// It never reads the process environment on its own except through a
// zero Env.Lookup, and never exits or panics on a bad value. Like every
// pkg/utils package, it never imports a package of this module outside
// pkg/utils.
package envutil

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"
)

// Lookup finds an environment variable; os.LookupEnv satisfies it.
type Lookup func(name string) (string, bool)

// Warn is told that name's value could not be used, and what was used
// instead: the default in text form, or EntrySkipped for a list entry.
type Warn func(name, value, used string)

// EntrySkipped is what Warn is told was used for a list entry that did
// not parse: nothing, the entry was dropped.
const EntrySkipped = "(entry skipped)"

// Env reads typed settings. The zero Env reads the process environment
// and warns through slog.Default().
type Env struct {
	Lookup Lookup // nil: os.LookupEnv
	Warn   Warn   // nil: SlogWarn(slog.Default())
}

// SlogWarn returns a Warn that logs a warning to log with the variable's
// name, the value and the value used.
func SlogWarn(log *slog.Logger) Warn {
	return func(name, value, used string) {
		log.Warn("ignoring an invalid environment variable value", "env", name, "value", value, "using", used)
	}
}

// Raw returns the value as set, untrimmed, and whether it is set at all
// (for the few settings upstream treats an empty value differently from
// an unset one).
func (e Env) Raw(name string) (string, bool) { return e.raw(name) }

func (e Env) raw(name string) (string, bool) {
	if e.Lookup == nil {
		return os.LookupEnv(name)
	}
	return e.Lookup(name)
}

func (e Env) warn(name, value, used string) {
	if e.Warn == nil {
		SlogWarn(slog.Default())(name, value, used)
		return
	}
	e.Warn(name, value, used)
}

// Reject is for a caller that refuses a value after parsing it (an IPv6
// entry of an IPv4-only list): it warns as the getters do, through Warn
// or, when nil, slog.Default().
func (e Env) Reject(name, value, used string) { e.warn(name, value, used) }

// Value returns the trimmed value and whether it is set to something
// other than blanks.
func (e Env) Value(name string) (string, bool) {
	v, _ := e.raw(name)
	v = strings.TrimSpace(v)
	return v, v != ""
}

// String returns the value as set (untrimmed); unset or empty gives def.
func (e Env) String(name, def string) string {
	if v, ok := e.raw(name); ok && v != "" {
		return v
	}
	return def
}

// Bool parses with strconv.ParseBool (1, t, T, TRUE, true, True, 0, f,
// ...); unset or blank gives def, anything else def with a warning.
func (e Env) Bool(name string, def bool) bool {
	v, ok := e.Value(name)
	if !ok {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		e.warn(name, v, strconv.FormatBool(def))
		return def
	}
	return b
}

// StrictBool is Bool for the variables upstream parses with its stricter
// helper, which also complains about a variable set to the empty string:
// set but empty or blank gives def with a warning (value ""), where Bool
// is silent.
func (e Env) StrictBool(name string, def bool) bool {
	if v, set := e.raw(name); set && strings.TrimSpace(v) == "" {
		e.warn(name, v, strconv.FormatBool(def))
		return def
	}
	return e.Bool(name, def)
}

// Int parses a decimal integer; unset or blank gives def, and an
// unparsable value or one below min gives def with a warning.
func (e Env) Int(name string, def, min int) int {
	v, ok := e.Value(name)
	if !ok {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < min {
		e.warn(name, v, strconv.Itoa(def))
		return def
	}
	return n
}

// IntIn is Int with a ceiling too: a value outside [min, max] gives def
// with a warning.
func (e Env) IntIn(name string, def, min, max int) int {
	n := e.Int(name, def, min)
	if n > max {
		v, _ := e.Value(name)
		e.warn(name, v, strconv.Itoa(def))
		return def
	}
	return n
}

// Seconds reads a whole number of seconds (a bare decimal integer, as
// upstream's IP_COOLDOWN_PERIOD) as a duration; unset or blank gives def,
// and an unparsable value or one below min seconds gives def with a
// warning.
func (e Env) Seconds(name string, def time.Duration, min int) time.Duration {
	v, ok := e.Value(name)
	if !ok {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < min || int64(n) > math.MaxInt64/int64(time.Second) {
		e.warn(name, v, def.String())
		return def
	}
	return time.Duration(n) * time.Second
}

// Uint32 parses a number in Go syntax, base detected from the prefix
// (0x80, 0o200, 0200, 0b1, 128); unset or blank gives def, and an
// unparsable value, one below min or beyond 32 bits gives def with a
// warning.
func (e Env) Uint32(name string, def, min uint32) uint32 {
	v, ok := e.Value(name)
	if !ok {
		return def
	}
	// ParseInt as upstream does, so a sign ("+128") is accepted.
	n, err := strconv.ParseInt(v, 0, 64)
	if err != nil || n < int64(min) || n > math.MaxUint32 {
		e.warn(name, v, strconv.FormatUint(uint64(def), 10))
		return def
	}
	return uint32(n)
}

// Duration parses a Go duration with its unit ("90s", "5m"); unset or
// blank gives def, and an unparsable value (a bare number other than 0
// included) or one below min gives def with a warning.
func (e Env) Duration(name string, def, min time.Duration) time.Duration {
	v, ok := e.Value(name)
	if !ok {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < min {
		e.warn(name, v, def.String())
		return def
	}
	return d
}

// OneOf returns the value if it is one of allowed (compared exactly, as
// upstream does); unset or blank gives def, anything else def with a
// warning.
func (e Env) OneOf(name, def string, allowed ...string) string {
	v, ok := e.Value(name)
	if !ok {
		return def
	}
	for _, a := range allowed {
		if v == a {
			return v
		}
	}
	e.warn(name, v, def)
	return def
}

// List reads a comma-separated list, trimming blanks and dropping empty
// entries; unset gives nil.
func (e Env) List(name string) []string {
	v, _ := e.raw(name)
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// Prefixes reads a comma-separated list of CIDRs of either family, each
// normalised to its network address (10.1.2.3/16 is 10.1.0.0/16, as
// net.ParseCIDR gives upstream). An entry that does not parse is dropped
// with a warning (used is EntrySkipped); the others are kept.
func (e Env) Prefixes(name string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range e.List(name) {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			e.warn(name, s, EntrySkipped)
			continue
		}
		out = append(out, p.Masked())
	}
	return out
}

// StringMap reads a JSON object whose values are strings
// ({"team":"net"}); unset or blank gives nil, and a value that is not such
// an object gives nil with a warning (used is "{}").
func (e Env) StringMap(name string) map[string]string {
	v, ok := e.Value(name)
	if !ok {
		return nil
	}
	var m map[string]string
	if err := json.Unmarshal([]byte(v), &m); err != nil || m == nil {
		e.warn(name, v, "{}")
		return nil
	}
	return m
}

// RangeError is a value the Lookup* forms refuse.
type RangeError struct {
	Name, Value string
	Min, Max    int
}

func (e *RangeError) Error() string {
	switch {
	case e.Max == math.MaxInt:
		return fmt.Sprintf("%s %q must be an integer >= %d", e.Name, e.Value, e.Min)
	default:
		return fmt.Sprintf("%s %q must be an integer between %d and %d", e.Name, e.Value, e.Min, e.Max)
	}
}

// LookupInt is Int for validation that must fail rather than fall back:
// unset or blank gives ok false and no error; a value that is not a
// decimal integer within [min, max] gives ok true and a *RangeError. It
// never warns.
func (e Env) LookupInt(name string, min, max int) (n int, ok bool, err error) {
	v, ok := e.Value(name)
	if !ok {
		return 0, false, nil
	}
	n, perr := strconv.Atoi(v)
	if perr != nil || n < min || n > max {
		return 0, true, &RangeError{Name: name, Value: v, Min: min, Max: max}
	}
	return n, true, nil
}

// String is Env{Lookup: env}.String, for code that refuses rather than
// warns (the pod-IP reconciler's settings). Everything that may fall back
// with a warning holds an Env, so that its warnings reach its logger.
func String(env Lookup, name, def string) string { return Env{Lookup: env}.String(name, def) }

// Held keeps warnings until they can be logged: ipamd learns where to
// log from the same environment it may have to warn about. The zero Held
// is ready to use; it is not safe for concurrent use.
type Held struct{ held [][3]string }

// Warn is a Warn that holds the warning.
func (h *Held) Warn(name, value, used string) {
	h.held = append(h.held, [3]string{name, value, used})
}

// Replay passes the held warnings to w in the order they came, and
// forgets them.
func (h *Held) Replay(w Warn) {
	for _, x := range h.held {
		w(x[0], x[1], x[2])
	}
	h.held = nil
}
