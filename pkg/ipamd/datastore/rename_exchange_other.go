//go:build !linux

package datastore

import "errors"

// errNoExchange: only Linux exchanges two names atomically here.
var errNoExchange = errors.New("rename exchange not supported")

func exchange(a, b string) error { return errNoExchange }
