package addfail

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A multi-NIC pod's failure on a card above 0 names the card at the end
// of the line and keeps the rest: reason, phrase, figures, next step.
func TestACardsCauseNamesTheCardAndKeepsTheLine(t *testing.T) {
	base := Explain(State{Now: now, Total: 2, Assigned: 1, Cooling: 1})
	got := base.OnCard(1)
	assert.Equal(t, base.Reason, got.Reason)
	assert.True(t, strings.HasPrefix(got.Line, base.Line), got.Line)
	assert.Equal(t, base.Line+" [multi-NIC pod: no address on network card 1]", got.Line)
	assert.True(t, strings.HasPrefix(got.Line, string(CoolingDown)+": released addresses are cooling down ("))
}
