package ipamcheck

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/subnetfigures"
)

// Report is one check, as -o json prints it. Keys are lower camel case and
// stable: scripts read them.
type Report struct {
	CheckedAt       time.Time       `json:"checkedAt"`
	RuntimeEndpoint string          `json:"runtimeEndpoint"`
	Sandboxes       int             `json:"sandboxes"`
	Reconciler      ReconcilerInfo  `json:"reconciler"`
	Addresses       []Row           `json:"addresses"`
	UnassignedByENI []ENIUnassigned `json:"unassignedByENI"`
	Summary         Summary         `json:"summary"`
	// NetworkCards is how many network cards ipamd manages (keys of
	// /v1/enis): each address and ENI names its card.
	NetworkCards int `json:"networkCards"`
	// Subnets are the subnets the node uses (its ENIs' and the candidates
	// for new ENIs) with EC2's free count as of ipamd's last
	// DescribeSubnets answer (/v1/subnets); absent when ipamd does not
	// serve that path (an older build) or names no subnet.
	Subnets []subnetfigures.SubnetFree `json:"subnets,omitempty"`
	// LeaksFound is what exit code 1 says: ipamd confirmed a leak
	// (summary.confirmedLeaks).
	LeaksFound bool `json:"leaksFound"`
}

// ReconcilerInfo is what /v1/reconciler said about the reconciler itself.
type ReconcilerInfo struct {
	Mode             string    `json:"mode"`
	GracePeriod      string    `json:"gracePeriod"`
	IPCooldown       string    `json:"ipCooldown,omitempty"`
	LastPass         time.Time `json:"lastPass,omitzero"`
	LastPassSkipped  string    `json:"lastPassSkipped,omitempty"`
	RuntimeReachable bool      `json:"runtimeReachable"`
	PendingReason    string    `json:"pendingReason,omitempty"`
}

func writeJSON(w io.Writer, r Report) error {
	if r.Addresses == nil {
		r.Addresses = []Row{}
	}
	if r.UnassignedByENI == nil {
		r.UnassignedByENI = []ENIUnassigned{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// writeTable prints one row per address (unassigned ones as one row per
// ENI unless every row was asked for), then the summary line. A node
// managing several network cards gets a CARD column.
func writeTable(w io.Writer, r Report) error {
	grace := r.Reconciler.GracePeriod
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	cards := severalCards(r)
	// cardCell is the CARD column's cell, with its tab; none on a node
	// managing one card.
	cardCell := func(n *int) string {
		switch {
		case !cards:
			return ""
		case n == nil:
			return "-\t"
		}
		return strconv.Itoa(*n) + "\t"
	}
	header := "ADDRESS\tENI\tPOD\tCONTAINER\tAGE\tVERDICT"
	if cards {
		header = "ADDRESS\tCARD\tENI\tPOD\tCONTAINER\tAGE\tVERDICT"
	}
	fmt.Fprintln(tw, header)
	free := r.UnassignedByENI
	// With -all the unassigned addresses are rows of their own.
	listsFree := slices.ContainsFunc(r.Addresses, func(a Row) bool { return a.Verdict == Unassigned })
	// flushFree prints the per-ENI rows of the ENIs ordered before upTo.
	flushFree := func(upTo int) {
		for len(free) > 0 && (free[0].order < upTo) {
			f := free[0]
			fmt.Fprintf(tw, "(%s)\t%s%s\t-\t-\t-\tunassigned (-all lists them)\n", plural(f.Unassigned, "address", "addresses"),
				cardCell(&f.NetworkCard), f.ENI)
			free = free[1:]
		}
	}
	for _, a := range r.Addresses {
		if !listsFree {
			flushFree(a.order)
		}
		pod := "-"
		if a.PodName != "" {
			pod = a.PodNamespace + "/" + a.PodName
		}
		age := "-"
		if a.Verdict != Unassigned {
			age = compactAge(time.Duration(a.AgeSeconds) * time.Second)
		}
		fmt.Fprintf(tw, "%s\t%s%s\t%s\t%s\t%s\t%s\n", a.Address, cardCell(a.NetworkCard), orDash(a.ENI), pod, orDash(shortID(a.ContainerID)), age,
			verdictText(a, grace))
	}
	if !listsFree {
		flushFree(1 << 31)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, summaryLine(r))
	return err
}

// severalCards says whether the node manages more than one network card
// (or, from an ipamd that did not say, whether a row names a card above 0).
func severalCards(r Report) bool {
	if r.NetworkCards > 1 {
		return true
	}
	return slices.ContainsFunc(r.Addresses, func(a Row) bool { return a.NetworkCard != nil && *a.NetworkCard > 0 }) ||
		slices.ContainsFunc(r.UnassignedByENI, func(f ENIUnassigned) bool { return f.NetworkCard > 0 })
}

func verdictText(a Row, grace string) string {
	switch a.Verdict {
	case Live:
		return "live"
	case InFlight:
		return "in flight (younger than the " + grace + " grace period)"
	case LeakedCandidate:
		if a.FirstSeenAbsent.IsZero() {
			return "leaked candidate, not confirmed (this check's list left its sandbox out; ipamd holds no candidate for it: " +
				"its own list or the runtime asked by the sandbox's ID has the sandbox, or it has not listed since)"
		}
		seen := fmt.Sprintf("first seen absent at %s, %s", a.FirstSeenAbsent.UTC().Format(time.RFC3339), plural(a.PassesAbsent, "pass", "passes"))
		switch {
		case a.Leak():
			return "leaked candidate (" + seen + ", confirmed" + heldText(a, "; ") + ")"
		case a.Confirmed:
			return "leaked candidate, not confirmed (" + seen + ", its sandbox gone, whether a sandbox uses its address not known" + heldText(a, "; ") + ")"
		case a.HeldBecause == "":
			return "leaked candidate, not confirmed (" + seen + "; ipamd has not decided on it yet)"
		}
		return "leaked candidate, not confirmed (" + seen + heldText(a, "; ") + ")"
	case InUse:
		text := "in use by sandbox " + shortID(a.UsedBy) + ", not leaked: ipamd keeps the address for it"
		if a.HeldBecause != "" {
			text += " (" + heldText(a, "") + ")"
		}
		return text
	case CoolingDown:
		if a.FreeAt.IsZero() {
			return "cooling down"
		}
		return "cooling down (free at " + a.FreeAt.UTC().Format(time.RFC3339) + ")"
	case Unassigned:
		return "unassigned"
	case OutsidePool:
		return "outside ipamd's pool: a branch ENI pod (security groups for pods) or a pod another plugin networked; ipamd never frees or counts it"
	}
	return string(a.Verdict)
}

// heldText is why ipamd keeps an address, after sep ("" when it did not say).
func heldText(a Row, sep string) string {
	if a.HeldBecause == "" {
		return ""
	}
	return sep + "held because " + a.HeldBecause
}

func summaryLine(r Report) string {
	s := r.Summary
	leaked := plural(s.LeakedCandidates, "leaked candidate", "leaked candidates")
	if s.LeakedCandidates > 0 {
		leaked += fmt.Sprintf(" (%d confirmed)", s.ConfirmedLeaks)
	}
	parts := []string{plural(s.Live, "live", "live"), plural(s.InFlight, "in flight", "in flight"), leaked}
	if s.InUse > 0 {
		parts = append(parts, fmt.Sprintf("%d in use by another sandbox", s.InUse))
	}
	parts = append(parts, plural(s.CoolingDown, "cooling down", "cooling down"), plural(s.Unassigned, "unassigned", "unassigned"))
	if s.Pending > 0 {
		parts[len(parts)-1] += fmt.Sprintf(" (%d waiting for the check against the runtime)", s.Pending)
	}
	if s.OutsidePool > 0 {
		parts = append(parts, plural(s.OutsidePool, "pod address", "pod addresses")+" outside ipamd's pool (branch ENI pods or another plugin's)")
	}
	enis := plural(s.ENIs, "ENI", "ENIs")
	if r.NetworkCards > 1 {
		enis += " of " + plural(r.NetworkCards, "network card", "network cards")
	}
	line := fmt.Sprintf("%s on %s: %s; reconciler %s mode, grace %s; %s on %s",
		plural(s.Addresses, "address", "addresses"), enis, strings.Join(parts, ", "),
		r.Reconciler.Mode, r.Reconciler.GracePeriod, plural(r.Sandboxes, "sandbox", "sandboxes"), r.RuntimeEndpoint)
	return line + subnetsText(r)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// shortID shortens a container ID as crictl does (13 characters).
func shortID(id string) string {
	if len(id) > 13 {
		return id[:13]
	}
	return id
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// compactAge renders an age with its two largest units: 42s, 12m5s, 3h12m, 5d3h.
func compactAge(d time.Duration) string {
	d = d.Truncate(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%dh", int(d.Hours())/24, int(d.Hours())%24)
}
