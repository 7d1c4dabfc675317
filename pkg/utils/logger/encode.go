package logger

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"time"
	"unicode/utf8"
)

// appendKey writes `"key":`, preceded by a comma unless it is the first
// member of an object. An empty buf is a fragment of fields that will
// follow msg (Handler.pre), so it gets the comma too.
func appendKey(buf []byte, key string) []byte {
	if n := len(buf); n == 0 || buf[n-1] != '{' {
		buf = append(buf, ',')
	}
	buf = appendString(buf, key)
	return append(buf, ':')
}

// appendAttr writes one field, following slog's rules: an empty Attr is
// dropped, a group without visible fields is dropped, a group without a
// key is inlined.
func appendAttr(buf []byte, a slog.Attr) []byte {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return buf
	}
	if a.Value.Kind() != slog.KindGroup {
		buf = appendKey(buf, a.Key)
		return appendValue(buf, a.Value)
	}
	members := a.Value.Group()
	if !anyVisible(members) {
		return buf
	}
	if a.Key != "" {
		buf = appendKey(buf, a.Key)
		buf = append(buf, '{')
	}
	for _, m := range members {
		buf = appendAttr(buf, m)
	}
	if a.Key != "" {
		buf = append(buf, '}')
	}
	return buf
}

// anyVisible reports whether appendAttr would write anything for attrs.
func anyVisible(attrs []slog.Attr) bool {
	for _, a := range attrs {
		v := a.Value.Resolve()
		switch {
		case v.Kind() == slog.KindGroup:
			if anyVisible(v.Group()) {
				return true
			}
		case a.Key != "" || !v.Equal(slog.Value{}):
			return true
		}
	}
	return false
}

// appendValue writes v as zap's production JSON encoder would: durations
// in seconds, times in the line's ISO 8601 layout, errors as their text,
// non-finite floats as strings, anything else as encoding/json does.
func appendValue(buf []byte, v slog.Value) []byte {
	switch v.Kind() {
	case slog.KindString:
		return appendString(buf, v.String())
	case slog.KindInt64:
		return appendInt(buf, v.Int64())
	case slog.KindUint64:
		return strconv.AppendUint(buf, v.Uint64(), 10)
	case slog.KindFloat64:
		return appendFloat(buf, v.Float64())
	case slog.KindBool:
		return strconv.AppendBool(buf, v.Bool())
	case slog.KindDuration:
		return appendFloat(buf, durationSeconds(v.Duration()))
	case slog.KindTime:
		return appendString(buf, v.Time().Format(timeLayout))
	}
	return appendAny(buf, v.Any())
}

func appendAny(buf []byte, x any) []byte {
	switch x := x.(type) {
	case nil:
		return append(buf, "null"...)
	case error:
		return appendString(buf, x.Error())
	case time.Duration:
		return appendFloat(buf, durationSeconds(x))
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(x); err != nil {
		return appendString(buf, fmt.Sprintf("%+v", x))
	}
	return append(buf, bytes.TrimRight(b.Bytes(), "\n")...)
}

func appendInt(buf []byte, n int64) []byte { return strconv.AppendInt(buf, n, 10) }

func appendFloat(buf []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(buf, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(buf, `"+Inf"`...)
	case math.IsInf(f, -1):
		return append(buf, `"-Inf"`...)
	}
	return strconv.AppendFloat(buf, f, 'f', -1, 64)
}

const hex = "0123456789abcdef"

// appendString writes s as a JSON string. Like zap, it escapes only what
// JSON requires (no HTML escaping) and replaces invalid UTF-8 with U+FFFD.
func appendString(buf []byte, s string) []byte {
	buf = append(buf, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				buf = append(buf, '\\', c)
			case c == '\n':
				buf = append(buf, '\\', 'n')
			case c == '\r':
				buf = append(buf, '\\', 'r')
			case c == '\t':
				buf = append(buf, '\\', 't')
			case c < 0x20:
				buf = append(buf, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				buf = append(buf, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			buf = append(buf, `\ufffd`...)
		} else {
			buf = append(buf, s[i:i+size]...)
		}
		i += size
	}
	return append(buf, '"')
}
