package ipamd

import (
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
)

// timedCheckpointer records how long each checkpoint write takes and how
// many fail, without the datastore knowing about metrics.
type timedCheckpointer struct {
	datastore.Checkpointer
	m *agentMetrics
}

func (t timedCheckpointer) Write(entries []datastore.CheckpointEntry) error {
	start := time.Now()
	err := t.Checkpointer.Write(entries)
	result := "success"
	if err != nil {
		result = "error"
		t.m.errors.WithLabelValues("checkpointWrite").Inc()
	}
	t.m.checkpointWrites.WithLabelValues(result).Observe(time.Since(start).Seconds())
	return err
}

// Prepare and Close pass through to checkpointers that have them.
func (t timedCheckpointer) Prepare() {
	if p, ok := t.Checkpointer.(interface{ Prepare() }); ok {
		p.Prepare()
	}
}

func (t timedCheckpointer) Close() error {
	if c, ok := t.Checkpointer.(interface{ Close() error }); ok {
		return c.Close()
	}
	return nil
}
