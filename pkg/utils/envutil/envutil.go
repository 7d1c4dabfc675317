// Package envutil parses environment variables the way upstream aws-node
// does for each kind of value, so existing settings keep their meaning.
package envutil

import (
	"strconv"
	"strings"
)

// Lookup finds an environment variable; os.LookupEnv satisfies it.
type Lookup func(name string) (string, bool)

// Bool reads a boolean: unset, empty or unparsable gives def.
func Bool(env Lookup, name string, def bool) bool {
	v, ok := env(name)
	if !ok || v == "" {
		return def
	}
	b, err := strconv.ParseBool(strings.TrimSpace(v))
	if err != nil {
		return def
	}
	return b
}

// Int reads an integer; unset or unparsable gives def, and so does a value
// below min.
func Int(env Lookup, name string, def, min int) int {
	v, ok := env(name)
	if !ok {
		return def
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < min {
		return def
	}
	return n
}

// String reads a string; unset or empty gives def.
func String(env Lookup, name, def string) string {
	if v, ok := env(name); ok && v != "" {
		return v
	}
	return def
}

// List reads a comma-separated list, trimming blanks and dropping empties.
func List(env Lookup, name string) []string {
	v, _ := env(name)
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}
