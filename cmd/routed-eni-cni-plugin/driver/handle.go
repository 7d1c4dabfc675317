package driver

import (
	"errors"

	"github.com/vishvananda/netlink"
)

// dumpTries bounds retries of a netlink dump the kernel interrupted
// because the table changed underneath it (other pods being set up).
const dumpTries = 5

// handle is a netlink handle whose dumps are retried when interrupted, so
// a partial list is never taken for the whole table.
type handle struct {
	*netlink.Handle
}

func retryDump[T any](f func() (T, error)) (T, error) {
	var (
		v   T
		err error
	)
	for range dumpTries {
		v, err = f()
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			return v, err
		}
	}
	return v, err
}

func (h handle) LinkList() ([]netlink.Link, error) {
	return retryDump(h.Handle.LinkList)
}

func (h handle) LinkByName(name string) (netlink.Link, error) {
	return retryDump(func() (netlink.Link, error) { return h.Handle.LinkByName(name) })
}

func (h handle) AddrList(l netlink.Link, family int) ([]netlink.Addr, error) {
	return retryDump(func() ([]netlink.Addr, error) { return h.Handle.AddrList(l, family) })
}

func (h handle) RouteList(l netlink.Link, family int) ([]netlink.Route, error) {
	return retryDump(func() ([]netlink.Route, error) { return h.Handle.RouteList(l, family) })
}

func (h handle) RouteListFiltered(family int, filter *netlink.Route, mask uint64) ([]netlink.Route, error) {
	return retryDump(func() ([]netlink.Route, error) { return h.Handle.RouteListFiltered(family, filter, mask) })
}

func (h handle) RuleListFiltered(family int, filter *netlink.Rule, mask uint64) ([]netlink.Rule, error) {
	return retryDump(func() ([]netlink.Rule, error) { return h.Handle.RuleListFiltered(family, filter, mask) })
}
