package cri

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// probe lists sandboxes on the current choice and on every candidate socket
// that exists, chooses a runtime, and returns the chosen runtime's list.
//
// A runtime that lists sandboxes wins over one that answers an empty list:
// on a CRI-O node containerd may also be running, its CRI plugin enabled but
// unused. The current choice is asked first and kept on a tie, so the
// choice only moves to a runtime that lists sandboxes while the current one
// lists none (or fails). With nothing chosen and every answer empty, the
// first candidate that answers is taken; ListSandboxes keeps probing while
// it stays empty, so the choice can still improve.
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

	var (
		first     *Client // first candidate that answered (empty)
		firstList []Sandbox
		curList   []Sandbox
		curErr    error
		errs      []error
	)
	for _, p := range paths {
		c, err := r.conn(p)
		if err != nil {
			return nil, err
		}
		list, err := c.ListSandboxes(ctx)
		if c == cur {
			curList, curErr = list, err
		}
		switch {
		case err != nil:
			errs = append(errs, err)
		case len(list) > 0:
			r.choose(c, list, fmt.Sprintf("it lists %d pod sandboxes", len(list)))
			return list, nil
		case first == nil:
			first, firstList = c, list
		}
	}
	switch {
	case cur != nil:
		r.noteList(cur, curList, curErr)
		return curList, curErr
	case first != nil:
		reason := "the only candidate socket that answers; it lists no pod sandboxes yet"
		if len(paths) > 1 {
			reason = "the first candidate socket that answers; none lists pod sandboxes, so probing continues while it lists none"
		}
		r.choose(first, firstList, reason)
		return firstList, nil
	}
	err = fmt.Errorf("cri: no candidate runtime socket answers: %w", errors.Join(errs...))
	r.note(err)
	return nil, err
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
