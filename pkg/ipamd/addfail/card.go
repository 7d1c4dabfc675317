package addfail

import "fmt"

// OnCard is c for a multi-NIC pod whose ADD failed because network card
// card had no address for it: the line gains a suffix naming the card; the
// reason, the phrase and the rest of the line stay as they are, so what
// matches the line without multi-NIC still matches it.
func (c Cause) OnCard(card int) Cause {
	c.Line += fmt.Sprintf(" [multi-NIC pod: no address on network card %d]", card)
	return c
}
