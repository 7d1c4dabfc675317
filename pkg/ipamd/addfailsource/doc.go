// Package addfailsource gathers what ipamd knows when an ADD finds no
// address: the datastore's figures, the pool manager's growth status, the
// pod-IP reconciler's outlook and the free addresses of the subnet growth
// draws from. It fills the State that the pure package addfail explains,
// and nothing else: the wording and the choice of the one cause are
// addfail's.
//
// It never waits, never changes anything and makes no EC2, runtime or
// API-server call: each part answers from its last published state, read
// through the small interfaces declared here. It never imports the agent.
package addfailsource
