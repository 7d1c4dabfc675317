package pool

// schedulable reports whether the pool may attach ENIs, add addresses or
// free ENIs now (AWS_MANAGE_ENIS_NON_SCHEDULABLE=false pauses all three on
// an unschedulable node, as upstream; addresses already in the pool are
// still handed out and idle ones still returned). It logs each change.
func (p *Manager) schedulable() bool {
	ok := p.Schedulable == nil || p.Schedulable()
	switch {
	case !ok && !p.paused:
		p.Log.Info("node is unschedulable (taint node.kubernetes.io/unschedulable:NoSchedule): " +
			"no ENI or address is added and no ENI freed until it is schedulable again (AWS_MANAGE_ENIS_NON_SCHEDULABLE=false)")
	case ok && p.paused:
		p.Log.Info("node is schedulable again: pool growth and ENI release resume")
	}
	p.paused = !ok
	return ok
}
