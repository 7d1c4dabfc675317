package cri

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// answer is one candidate socket's reply to a probe's list, as decide
// reads it.
type answer struct {
	listed  int  // sandboxes listed
	ownPod  bool // the list names ipamd's own pod (Config.OwnPod)
	err     error
	current bool // the socket is the current choice
}

// verdict is decide's choice among a probe's answers.
type verdict struct {
	pick   int    // index of the chosen answer; -1: none answered
	reason string // why, for the log
	// noOwnPod: the own pod is known, some runtime answered, and no answer
	// names it; the choice then rests on the weaker rules below.
	noOwnPod bool
}

// decide chooses a runtime from the answers of a probe, asked in order
// (the current choice first, then the candidates in order of preference).
// ownPod says whether ipamd's own pod name is known. In order:
//
//  1. the first that lists ipamd's own pod: aws-node's pod always has a
//     sandbox on the runtime the kubelet uses, and on no other, so this
//     settles it (and the current choice, asked first, keeps it);
//  2. the first that lists any sandbox: on a CRI-O node containerd may
//     also be running, its CRI plugin enabled but unused;
//  3. the current choice, even empty or failing (a tie keeps it);
//  4. the first that answered, though empty: the runtime may list pods
//     later, and ListSandboxes keeps probing while it lists none.
//
// It does no I/O: the probe asks, decide chooses, the probe acts.
func decide(answers []answer, ownPod bool) verdict {
	noOwnPod := false
	if ownPod {
		for i, a := range answers {
			if a.err == nil && a.ownPod {
				return verdict{pick: i, reason: "it lists ipamd's own pod (MY_POD_NAME)"}
			}
		}
		noOwnPod = slices.ContainsFunc(answers, func(a answer) bool { return a.err == nil })
	}
	for i, a := range answers {
		if a.err == nil && a.listed > 0 {
			return verdict{pick: i, reason: fmt.Sprintf("it lists %d pod sandboxes", a.listed), noOwnPod: noOwnPod}
		}
	}
	if i := slices.IndexFunc(answers, func(a answer) bool { return a.current }); i >= 0 {
		return verdict{pick: i, reason: "the current choice; no other candidate lists pod sandboxes", noOwnPod: noOwnPod}
	}
	answered := 0
	for _, a := range answers {
		if a.err == nil {
			answered++
		}
	}
	for i, a := range answers {
		if a.err != nil {
			continue
		}
		reason := "the only candidate socket that answers; it lists no pod sandboxes yet"
		if answered > 1 {
			reason = "the first candidate socket that answers; none lists pod sandboxes, so probing continues while it lists none"
		}
		return verdict{pick: i, reason: reason, noOwnPod: noOwnPod}
	}
	return verdict{pick: -1}
}

// settles says whether an answer ends a probe early: decide would choose
// it whatever the later candidates answer.
func settles(a answer, ownPod bool) bool {
	if a.err != nil {
		return false
	}
	if ownPod {
		return a.ownPod
	}
	return a.listed > 0
}

// probe lists sandboxes on the current choice and on the candidate sockets
// that exist, chooses a runtime (decide), and returns the chosen runtime's
// list. ListSandboxes probes while the choice lists no sandboxes, or, when
// ipamd's own pod is known, while it does not list that pod, so a better
// runtime (one whose socket appeared later) can take over.
func (r *Runtime) probe(ctx context.Context) ([]Sandbox, error) {
	r.probeMu.Lock()
	defer r.probeMu.Unlock()
	cur, _, err := r.current()
	if err != nil {
		return nil, err
	}
	paths := existingSockets(r.candidates)
	if cur != nil {
		paths = append([]string{cur.path}, slices.DeleteFunc(paths, func(p string) bool { return p == cur.path })...)
	}
	if len(paths) == 0 {
		err := noRuntime(r.candidates)
		r.note(err)
		return nil, err
	}

	known := r.ownPod != ""
	var (
		clients []*Client
		lists   [][]Sandbox
		answers []answer
	)
	for _, p := range paths {
		c, err := r.conn(p)
		if err != nil {
			return nil, err
		}
		list, err := c.ListSandboxes(ctx)
		a := answer{listed: len(list), ownPod: known && namesPod(list, r.ownPod), err: err, current: c == cur}
		clients, lists, answers = append(clients, c), append(lists, list), append(answers, a)
		if settles(a, known) {
			break
		}
	}

	v := decide(answers, known)
	if v.noOwnPod {
		r.warnNoOwnPod(paths)
	}
	if v.pick < 0 {
		errs := make([]error, 0, len(answers))
		for _, a := range answers {
			errs = append(errs, a.err)
		}
		err = fmt.Errorf("cri: no candidate runtime socket answers: %w", errors.Join(errs...))
		r.note(err)
		return nil, err
	}
	c, list, err := clients[v.pick], lists[v.pick], answers[v.pick].err
	if err != nil { // the current choice, kept although it failed
		r.noteList(c, nil, err)
		return nil, err
	}
	r.choose(c, list, v.reason)
	return list, nil
}

// namesPod says whether list holds a sandbox of the pod named name.
func namesPod(list []Sandbox, name string) bool {
	return slices.ContainsFunc(list, func(s Sandbox) bool { return s.Name == name })
}

// warnNoOwnPod says, once, that no runtime lists ipamd's own pod: the
// probe may then have chosen a runtime the kubelet does not use.
func (r *Runtime) warnNoOwnPod(sockets []string) {
	r.mu.Lock()
	warned := r.warnedNoOwnPod
	r.warnedNoOwnPod = true
	r.mu.Unlock()
	if warned {
		return
	}
	r.log.Warn("no container runtime socket lists ipamd's own pod, so the probe may pick a runtime the kubelet does not use: "+
		"set CRI_RUNTIME_ENDPOINT to the kubelet's runtime socket (criSocket in the chart)",
		"MY_POD_NAME", r.ownPod, "sockets", sockets)
}

// choose makes c the chosen runtime after it answered list, logging a change.
func (r *Runtime) choose(c *Client, list []Sandbox, reason string) {
	r.mu.Lock()
	prev := r.chosen
	r.chosen = c
	r.mu.Unlock()
	r.noteList(c, list, nil)
	if prev == c {
		return
	}
	args := []any{"endpoint", c.path, "reason", reason}
	if prev != nil {
		args = append(args, "previous", prev.path)
	}
	r.log.Info("CRI endpoint chosen", args...)
}
