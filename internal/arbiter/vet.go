package arbiter

import (
	"fmt"
	"slices"
)

// Start is the operation that may start on a node this pass, as the table
// and Precedence say, before any budget.
type Start struct {
	Op Operation
	// Free says the start takes no place in any budget: a MIG
	// reconfiguration that costs nothing (Node.MIGFree).
	Free bool
}

// Candidates returns the operations that may start on the node, as the
// table and Precedence say, in Precedence order, before any budget; and
// why each other queued operation waits. Admit starts the first whose
// budgets have room: an operation that waits for a place does not hold
// back the node's next one (an upgrade queued behind a full pool budget
// does not stop the node's repair). A start that costs no place (a free
// MIG reconfiguration) is the only one: it goes first.
func Candidates(n *Node) ([]Start, map[Operation]string) {
	waits := map[Operation]string{}
	var starts []Start
	for i, op := range Precedence {
		if n.Ops[op].Phase != Queued || (i == 0 && !n.MIGFree) || slices.ContainsFunc(starts, func(s Start) bool { return s.Op == op }) {
			continue
		}
		if len(starts) > 0 && starts[0].Free {
			if _, told := waits[op]; !told {
				waits[op] = fmt.Sprintf("%s goes first", starts[0].Op.withArticle())
			}
			continue
		}
		ok, why := mayStart(n, op)
		if !ok {
			// One that must wait for the holder does not hold back the
			// others: a MIG configuration applied again may be what the
			// holder waits for.
			waits[op] = why
			continue
		}
		starts = append(starts, Start{Op: op, Free: op == MIGReconfiguration && n.MIGFree})
		delete(waits, op)
	}
	return starts, waits
}

// Vet says whether operation op may take a step from phase from to phase
// to on the node, as the operations stand before this pass; admitted is
// the operation Admit let start on the node this pass, None if none. It
// returns why not when it may not: the step is then not taken, and the
// operation stays where it is.
func Vet(n *Node, op Operation, from, to Phase, admitted Operation) (bool, string) {
	switch {
	case !to.Holds() || to == Releasing:
		// It lets the node go, or takes back its own marks.
		return true, ""
	case !from.Holds():
		// A start: Admit decided it, after the table.
		if admitted != op {
			return false, fmt.Sprintf("the %s was not admitted", op)
		}
		return true, ""
	case to == Active:
		for other := range NumOperations {
			if other == op || n.Ops[other].Phase != Active {
				continue
			}
			// One acts at a time. Two that act (a state written before
			// this table, or by a person) go on by rank, the other
			// waiting: its timeout ends it.
			if from != Active || other < op {
				return false, fmt.Sprintf("%s acts on the node", other.withArticle())
			}
		}
		if from == Active {
			return true, ""
		}
		// A parked or validating operation acts again (approved again,
		// a new configuration, driver or mode): as a start, without a
		// new place. One that another start was admitted beside this
		// pass waits: both would act.
		if admitted != None && admitted != op {
			return false, fmt.Sprintf("%s starts on the node first", admitted.withArticle())
		}
		// One queued before it in Precedence and not admitted waits for a
		// place: it does not hold this one back, which takes none.
		if ok, why := mayStart(n, op); !ok {
			return false, why
		}
	}
	// Into a phase that only waits (validating, parked).
	return true, ""
}
