package eniconfig

import "fmt"

const (
	// DefaultKey is the annotation and label key naming a node's ENIConfig
	// when ENI_CONFIG_ANNOTATION_DEF / ENI_CONFIG_LABEL_DEF are unset.
	DefaultKey = "k8s.amazonaws.com/eniConfig"
	// ExternalLabel, when present on the node, names its ENIConfig ahead
	// of everything else; it is meant for tools that manage the choice
	// outside the cluster (the kubelet's --node-labels, for one).
	ExternalLabel = "vpc.amazonaws.com/externalEniConfig"
	// DefaultName is the ENIConfig a node uses when nothing names one.
	DefaultName = "default"
)

// Keys are the node annotation and label keys that name the ENIConfig
// (ENI_CONFIG_ANNOTATION_DEF, ENI_CONFIG_LABEL_DEF). An empty field means
// DefaultKey, as upstream treats an empty variable.
type Keys struct{ Annotation, Label string }

func (k Keys) annotation() string {
	if k.Annotation == "" {
		return DefaultKey
	}
	return k.Annotation
}

func (k Keys) label() string {
	if k.Label == "" {
		return DefaultKey
	}
	return k.Label
}

// Name returns the name of the ENIConfig a node with these labels and
// annotations uses: the label ExternalLabel if present, else the
// annotation k.Annotation, else the label k.Label, else DefaultName.
//
// A key that is present with an empty value is chosen, and yields "", as
// upstream does: presence is what decides. Falling through to a later key
// or to "default" instead could put the node's ENIs in a subnet nobody
// picked for it; Reader.Selected refuses "" with an error naming the key.
func Name(labels, annotations map[string]string, k Keys) string {
	return choose(labels, annotations, k).name
}

// choice is a chosen name and where it came from, for messages.
type choice struct {
	name string
	from string // e.g. `label "vpc.amazonaws.com/externalEniConfig"`; "" for the default
}

func (c choice) source() string {
	if c.from == "" {
		return "no label or annotation names one, so the default applies"
	}
	return "named by its " + c.from
}

func choose(labels, annotations map[string]string, k Keys) choice {
	if v, ok := labels[ExternalLabel]; ok {
		return choice{name: v, from: fmt.Sprintf("label %q", ExternalLabel)}
	}
	if v, ok := annotations[k.annotation()]; ok {
		return choice{name: v, from: fmt.Sprintf("annotation %q", k.annotation())}
	}
	if v, ok := labels[k.label()]; ok {
		return choice{name: v, from: fmt.Sprintf("label %q", k.label())}
	}
	return choice{name: DefaultName}
}
