package driver

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"net"
)

// macTries bounds the search for a MAC no node link uses.
const macTries = 10

// RandomMAC returns a random locally administered unicast MAC address.
func RandomMAC() (net.HardwareAddr, error) {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	b[0] = (b[0] | 0x02) &^ 0x01 // locally administered, unicast
	return net.HardwareAddr(b), nil
}

// uniqueMAC draws random MACs until one differs from every address in
// used.
func uniqueMAC(used []net.HardwareAddr) (net.HardwareAddr, error) {
	for range macTries {
		mac, err := RandomMAC()
		if err != nil {
			return nil, err
		}
		clash := false
		for _, u := range used {
			if bytes.Equal(u, mac) {
				clash = true
				break
			}
		}
		if !clash {
			return mac, nil
		}
	}
	return nil, fmt.Errorf("no unused MAC address after %d tries", macTries)
}
