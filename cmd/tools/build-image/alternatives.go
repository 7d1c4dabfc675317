package main

import (
	"bytes"
	"fmt"
	"path"
	"strings"
)

// alternativesDir holds the Red Hat style alternatives admin files (the
// eks-distro bases are Amazon Linux 2023): /var/lib/alternatives/<group>.
const (
	alternativesAdminDir = "/var/lib/alternatives"
	alternativesLinkDir  = "/etc/alternatives"
)

// altGroup is one parsed admin file. Its format: the mode ("auto" or
// "manual"), the master link, then pairs of slave name and slave link up
// to an empty line, then per alternative its target, its priority and one
// line per slave with that slave's target (empty: none).
type altGroup struct {
	Name    string
	Mode    string
	Link    string
	Slaves  []altSlave
	Choices []altChoice
}

type altSlave struct{ Name, Link string }

type altChoice struct {
	Target   string
	Line     string // the target line as read (may carry a family prefix)
	Priority string
	Slaves   []string // one per altGroup.Slaves, "" when the choice has none
}

// parseAlternatives reads the admin file of group name.
func parseAlternatives(name string, data []byte) (altGroup, error) {
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	g := altGroup{Name: name}
	bad := func(format string, a ...any) (altGroup, error) {
		return altGroup{}, fmt.Errorf("alternatives %s: "+format, append([]any{name}, a...)...)
	}
	next := func() (string, bool) {
		if len(lines) == 0 {
			return "", false
		}
		l := strings.TrimSpace(lines[0])
		lines = lines[1:]
		return l, true
	}
	var ok bool
	if g.Mode, ok = next(); !ok || (g.Mode != "auto" && g.Mode != "manual") {
		return bad("mode %q, want auto or manual", g.Mode)
	}
	if g.Link, ok = next(); !ok || !path.IsAbs(g.Link) {
		return bad("master link %q is not an absolute path", g.Link)
	}
	for {
		s, ok := next()
		if !ok {
			return bad("slave list not terminated by an empty line")
		}
		if s == "" {
			break
		}
		l, ok := next()
		if !ok || !path.IsAbs(l) {
			return bad("slave %s has link %q, want an absolute path", s, l)
		}
		g.Slaves = append(g.Slaves, altSlave{Name: s, Link: l})
	}
	for len(lines) > 0 {
		t, _ := next()
		if t == "" {
			continue
		}
		line := t
		// A family prefix "@family@" may precede the target.
		if strings.HasPrefix(t, "@") {
			if i := strings.Index(t[1:], "@"); i >= 0 {
				t = t[i+2:]
			}
		}
		if !path.IsAbs(t) {
			return bad("alternative %q is not an absolute path", t)
		}
		prio, ok := next()
		if !ok {
			return bad("alternative %s has no priority", t)
		}
		c := altChoice{Target: t, Line: line, Priority: prio}
		for range g.Slaves {
			s, _ := next() // a missing trailing line is an empty slave
			c.Slaves = append(c.Slaves, s)
		}
		g.Choices = append(g.Choices, c)
	}
	return g, nil
}

// symlink is one symbolic link of a layer.
type symlink struct{ Path, Target string }

// set is what `update-alternatives --set <group> <target>` leaves behind:
// the master and slave links pointing into /etc/alternatives, the
// /etc/alternatives links pointing at the chosen alternative and its
// slaves, and the admin file switched to manual mode. A slave the choice
// does not provide gets no link.
func (g altGroup) set(target string) (links []symlink, admin []byte, err error) {
	var choice *altChoice
	var known []string
	for i := range g.Choices {
		known = append(known, g.Choices[i].Target)
		if g.Choices[i].Target == target {
			choice = &g.Choices[i]
		}
	}
	if choice == nil {
		return nil, nil, fmt.Errorf("alternatives %s: %s is not one of its alternatives %q", g.Name, target, known)
	}
	links = append(links,
		symlink{Path: g.Link, Target: path.Join(alternativesLinkDir, g.Name)},
		symlink{Path: path.Join(alternativesLinkDir, g.Name), Target: target})
	for i, s := range g.Slaves {
		if choice.Slaves[i] == "" {
			continue
		}
		links = append(links,
			symlink{Path: s.Link, Target: path.Join(alternativesLinkDir, s.Name)},
			symlink{Path: path.Join(alternativesLinkDir, s.Name), Target: choice.Slaves[i]})
	}
	return links, g.format("manual"), nil
}

// format writes the admin file back with mode.
func (g altGroup) format(mode string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s\n%s\n", mode, g.Link)
	for _, s := range g.Slaves {
		fmt.Fprintf(&b, "%s\n%s\n", s.Name, s.Link)
	}
	b.WriteString("\n")
	for _, c := range g.Choices {
		fmt.Fprintf(&b, "%s\n%s\n", c.Line, c.Priority)
		for _, s := range c.Slaves {
			fmt.Fprintf(&b, "%s\n", s)
		}
	}
	return b.Bytes()
}
