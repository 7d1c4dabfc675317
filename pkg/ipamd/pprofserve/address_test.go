package pprofserve

import (
	"errors"
	"strings"
	"testing"
)

func TestAddress(t *testing.T) {
	accepted := map[string]string{
		"127.0.0.1:6060":                    "127.0.0.1:6060",
		"127.0.0.2:6060":                    "127.0.0.2:6060",
		"[::1]:6060":                        "[::1]:6060",
		"localhost:6060":                    "127.0.0.1:6060",
		"LocalHost:6061":                    "127.0.0.1:6061",
		"127.0.0.1:0":                       "127.0.0.1:0",
		"[::ffff:127.0.0.1]:6060":           "[::ffff:127.0.0.1]:6060",
		"unix:/var/run/aws-node/pprof.sock": "unix:/var/run/aws-node/pprof.sock",
		"unix:///var/run/aws-node/../aws-node/p.sock": "unix:/var/run/aws-node/p.sock",
	}
	for in, want := range accepted {
		got, err := Address(in)
		if err != nil || got != want {
			t.Errorf("Address(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	refused := map[string]string{
		":6060":                             "every address",
		"0.0.0.0:6060":                      "not a loopback",
		"[::]:6060":                         "not a loopback",
		"10.0.0.12:6060":                    "not a loopback",
		"192.168.1.1:80":                    "not a loopback",
		"node.local:6060":                   "not a loopback",
		"127.0.0.1":                         "host:port",
		"6060":                              "host:port",
		"127.0.0.1:http":                    "port",
		"127.0.0.1:70000":                   "port",
		"127.0.0.1:":                        "port",
		"unix:pprof.sock":                   "absolute",
		"unix:":                             "absolute",
		"unix:/" + strings.Repeat("d", 120): "longer than",
	}
	for in, want := range refused {
		got, err := Address(in)
		if err == nil {
			t.Errorf("Address(%q) = %q, want an error", in, got)
			continue
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Address(%q) error %q does not say %q", in, err, want)
		}
		if strings.Contains(want, "loopback") || want == "every address" {
			if !errors.Is(err, ErrNotLoopback) {
				t.Errorf("Address(%q): %v is not ErrNotLoopback", in, err)
			}
		}
	}
}
