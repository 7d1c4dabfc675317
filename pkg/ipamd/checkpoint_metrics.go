package ipamd

import (
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
)

// timedCheckpointer records how long each checkpoint write takes and how
// many fail, without the datastore knowing about metrics. It embeds the
// file writer itself, not the Checkpointer interface, so every method the
// datastore looks for (Prepare, Ready, Close) is the writer's own: only
// Write is wrapped.
type timedCheckpointer struct {
	*datastore.FileCheckpointer
	m *agentMetrics
}

func (t timedCheckpointer) Write(entries []datastore.CheckpointEntry) error {
	start := time.Now()
	err := t.FileCheckpointer.Write(entries)
	result := "success"
	if err != nil {
		result = "error"
		t.m.errors.WithLabelValues("checkpointWrite").Inc()
	}
	t.m.checkpointWrites.WithLabelValues(result).Observe(time.Since(start).Seconds())
	return err
}
