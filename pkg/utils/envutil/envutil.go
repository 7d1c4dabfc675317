// Package envutil is the project's one parser of environment variables.
// Every binary reads its settings through it, so a variable read by more
// than one of them (AWS_VPC_ENI_MTU, ENABLE_IPv6, ...) means the same
// thing everywhere.
//
// The rules, per kind, follow upstream aws-node's lenient parsing:
//
//   - unset, empty or blank is the default, silently;
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

// String is Env{Lookup: env}.String.
func String(env Lookup, name, def string) string { return Env{Lookup: env}.String(name, def) }

// Bool is Env{Lookup: env}.Bool: it warns through slog.Default().
func Bool(env Lookup, name string, def bool) bool { return Env{Lookup: env}.Bool(name, def) }

// Int is Env{Lookup: env}.Int: it warns through slog.Default().
func Int(env Lookup, name string, def, min int) int { return Env{Lookup: env}.Int(name, def, min) }

// StringMap is Env{Lookup: env}.StringMap: it warns through slog.Default().
func StringMap(env Lookup, name string) map[string]string { return Env{Lookup: env}.StringMap(name) }

// List is Env{Lookup: env}.List.
func List(env Lookup, name string) []string { return Env{Lookup: env}.List(name) }
