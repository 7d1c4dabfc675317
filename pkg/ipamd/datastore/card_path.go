package datastore

import (
	"strconv"
	"strings"
)

// CheckpointPathForCard is where the store of network card card keeps its
// checkpoint, as upstream names the files: card 0 at base itself (the
// configured path, ipam.json by default), any other card at base with a
// trailing ".json" removed and "-nic-<card>.json" added
// (/var/run/aws-node/ipam-nic-1.json).
func CheckpointPathForCard(base string, card int) string {
	if card == 0 {
		return base
	}
	return strings.TrimSuffix(base, ".json") + "-nic-" + strconv.Itoa(card) + ".json"
}
