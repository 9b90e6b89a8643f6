package arbiter

import "time"

// Node is what the arbiter knows of a GPU node.
type Node struct {
	Name string
	// Pool is the node's driver pool: per-pool budgets count within it.
	Pool string
	// Domain is the node's NVLink domain (GFD's nvidia.com/gpu.clique,
	// <cluster UUID>.<clique ID>); "" counts the node as a domain of its
	// own.
	Domain string
	// Unavailable is true when the node cannot run workloads now:
	// cordoned, by anyone, or not Ready.
	Unavailable bool
	// Ops is where each operation stands on the node.
	Ops [NumOperations]Position
	// MIGRestore is true when the MIG reconfiguration queued on the node
	// makes devices the node has none of, gone with a reboot, a new driver
	// or DynamicMIG: the devices an upgrade's or a repair's validation
	// waits for, the configuration applied before or a new one (the
	// device plugin stays off until one is made).
	MIGRestore bool
	// MIGFree is true when a MIG reconfiguration of the node costs no
	// place in a budget: the node serves no GPUs (a new node) or its MIG
	// devices are gone, and no GPU pod runs on it.
	MIGFree bool
}

// Holder returns the operation holding the node that acts on it, else
// the first one holding it, None when none does.
func (n *Node) Holder() Operation {
	holder := None
	for op := range NumOperations {
		switch ph := n.Ops[op].Phase; {
		case ph == Active:
			return op
		case ph.Holds() && holder == None:
			holder = op
		}
	}
	return holder
}

// Held reports whether any operation holds the node out of service: it
// takes one place in every availability budget, whichever holds it,
// however many do.
func (n *Node) Held() bool { return n.Holder() != None }

// Clock is when the timeouts of op's validation on the node count from,
// and whether they are paused: one clock per node (issue 52, finding 4).
// An operation the table lets act within the validation (a MIG
// configuration applied again, which the validation waits for) pauses it
// while it acts, and while it waits to act (for a place in its budget, or
// back in the queue for another attempt); the validation counts afresh
// from the other's last change of state after: no operation fails because
// another one it let in took time. An operation queued that the table
// holds back (it waits for the validation to end), and one the table
// never lets in within the validation, change nothing.
// Outside a validation the operation's own time stands: the table lets
// nothing act beside an active one.
func (n *Node) Clock(op Operation) (since time.Time, paused bool) {
	own := n.Ops[op]
	since = own.Since
	if own.Phase != Validating {
		return since, false
	}
	for other := range NumOperations {
		pos := n.Ops[other]
		switch {
		case other == op || !letIn(other, op):
			// The table lets it in nowhere within this validation: its
			// changes of state (a repair marked required, not started)
			// are not this validation's business.
		case pos.Phase == Active:
			paused = true
		case pos.Phase == Queued:
			if ok, _ := mayStart(n, other); ok {
				paused = true
			}
		case pos.Since.After(since):
			since = pos.Since
		}
	}
	return since, paused
}

// letIn reports whether the table lets want start, in some case, while
// holder validates.
func letIn(want, holder Operation) bool {
	for _, r := range Table {
		if r.Want == want && r.Holder == holder && r.Phase == Validating && r.Verdict != Wait {
			return true
		}
	}
	return false
}
