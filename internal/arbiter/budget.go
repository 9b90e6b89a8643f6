package arbiter

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/gpu-operator/gpu-operator/internal/budget"
)

// Budget caps how many nodes, or NVLink domains, the operations may hold
// out of service at once, in each driver pool or in the whole fleet. An
// operation's own budget (maxParallelUpgrades, remediation.maxParallel,
// migManager.maxParallel) is its share: it counts the nodes that
// operation holds (acting, validating, releasing, or parked: failed, or
// waiting for a reboot, as NVIDIA's upgrade counts a failed node in
// progress), so that repairs and MIG changes go on during a rollout
// (issue 52, finding 2). The availability budgets (maxUnavailable, the
// NVLink domain cap) count every hold, whichever operation's, and stay
// hard. Each counts a node once.
type Budget struct {
	// Field is the policy field the limit comes from: errors name it.
	Field string
	// Op is the operation whose budget it is; None for one every
	// operation shares (the NVLink domain cap).
	Op Operation
	// Limit is a count, or a percentage of the scope's nodes (domains)
	// rounded up; Unlimited ignores it.
	Limit     intstr.IntOrString
	Unlimited bool
	// PerPool counts within each driver pool; otherwise in the fleet.
	PerPool bool
	// Pool, with PerPool, limits the budget to one driver pool's nodes: a
	// pool with upgrade settings of its own (an NVIDIADriver's). Others
	// sets the budget for the pools no budget of the same list names.
	Pool   string
	Others bool
	// Domains counts the NVLink domains with a node out of service, not
	// the nodes: a node of a domain counted already starts without a
	// place.
	Domains bool
	// Unavailable counts every hold, and the nodes cordoned or not Ready,
	// and lets a node already unavailable start without a place: it has
	// no availability to lose (driver.upgradePolicy.maxUnavailable).
	Unavailable bool
}

// share reports whether the budget is an operation's own share, which
// counts that operation's holds alone.
func (b Budget) share() bool { return b.Op != None && !b.Unavailable }

// Counts reports whether the budget counts the node as out of service.
func (b Budget) Counts(n *Node) bool {
	if b.share() {
		return n.Ops[b.Op].Phase.Holds()
	}
	return n.Held() || (b.Unavailable && n.Unavailable)
}

// Budgets are the budgets each operation's starts must fit.
type Budgets [NumOperations][]Budget

// Admission is who may start where this pass.
type Admission struct {
	// Admitted maps a node to the operation that starts on it.
	Admitted map[string]Operation
	// Waiting says, for a node whose queued operations may not start,
	// why: the table's reason, or the budget that is full.
	Waiting map[string]string
}

// Admit decides which queued operations start this pass: the starts the
// table and Precedence let start on each node (Candidates), longest
// waiting first (by name at a tie), each within every budget of its
// operation. A node is served at the place of each of its queued starts,
// trying first those before it in Precedence that it has not tried yet:
// an operation waiting for a place in its budget does not hold back the
// node's next one, which is served as long as it has waited, and takes
// the node's place of precedence only when it could not start anyway. A
// node a budget counts already (another operation acting on it, an
// unavailable node for maxUnavailable, a domain out of service) takes no
// new place in it; a MIG reconfiguration that costs nothing takes none at
// all. A budget that cannot be read (a value stored before the API server
// refused it) holds back the starts it covers, and is returned as an
// error naming its field once a start asks for a place in it. Nodes are a
// fleet's, their names unique: each counts once in a budget's size.
func Admit(nodes []Node, budgets Budgets) (Admission, []error) {
	a := Admission{Admitted: map[string]Operation{}, Waiting: map[string]string{}}
	counts := newCounts(nodes)
	queue := Queue(nodes, a)
	// Sized once: late in a rollout every node of a large fleet is
	// queued, and growing these maps a node at a time was a fifth of a
	// look that judges no node anew.
	tried := make(map[string]int, len(queue))
	refused := make(map[string][]string, len(queue))
	// A full budget refuses every node queued in its scope with the same
	// words: written once per look, not once per node.
	refusal := map[[2]string]string{}
	for _, w := range queue {
		name := w.Node.Name
		if _, done := a.Admitted[name]; done {
			continue
		}
		for ; tried[name] <= w.rank; tried[name]++ {
			op := w.ranked[tried[name]]
			if full := counts.full(w.Node, budgets[op]); full != "" {
				key := [2]string{op.String(), full}
				why, ok := refusal[key]
				if !ok {
					why = fmt.Sprintf("the %s waits for %s", op, full)
					refusal[key] = why
				}
				refused[name] = append(refused[name], why)
				continue
			}
			a.Admitted[name] = op
			counts.take(w.Node, op)
			break
		}
	}
	for name, why := range refused {
		if held := a.Waiting[name]; held != "" {
			why = append(why, held)
		}
		a.Waiting[name] = strings.Join(why, "; ")
	}
	for name := range a.Admitted {
		// Its other operations wait for the one that starts, as they
		// would for any holder: told once it holds the node.
		delete(a.Waiting, name)
	}
	return a, counts.errs
}

// QueuedStart is a start that waits for a place in its operation's budgets.
type QueuedStart struct {
	Node *Node
	Op   Operation
	// ranked are the node's queued starts in Precedence order; rank is
	// this one's place among them.
	ranked []Operation
	rank   int
}

// Queue returns the starts that need a place, in the order Admit serves
// them: longest waiting first, by name and Precedence at a tie. A node
// has one for each operation that may start there. Into a, where not nil,
// it admits the starts that need none and says why the nodes with none
// to make wait (the table's reasons; Admit adds the budgets').
func Queue(nodes []Node, a Admission) []QueuedStart {
	var queue []QueuedStart
	for i := range nodes {
		n := &nodes[i]
		starts, waits := Candidates(n)
		if len(waits) > 0 && a.Waiting != nil {
			a.Waiting[n.Name] = joinWaits(waits)
		}
		if len(starts) == 0 {
			continue
		}
		if starts[0].Free {
			if a.Admitted != nil {
				a.Admitted[n.Name] = starts[0].Op
			}
			continue
		}
		ranked := make([]Operation, len(starts))
		for r, s := range starts {
			ranked[r] = s.Op
		}
		for r, op := range ranked {
			queue = append(queue, QueuedStart{Node: n, Op: op, ranked: ranked, rank: r})
		}
	}
	slices.SortFunc(queue, func(x, y QueuedStart) int {
		return cmp.Or(x.Node.Ops[x.Op].Since.Compare(y.Node.Ops[y.Op].Since), strings.Compare(x.Node.Name, y.Node.Name),
			cmp.Compare(x.rank, y.rank))
	})
	return queue
}

func joinWaits(waits map[Operation]string) string {
	var parts []string
	for op := range NumOperations {
		if why, ok := waits[op]; ok {
			parts = append(parts, fmt.Sprintf("the %s waits: %s", op, why))
		}
	}
	return strings.Join(parts, "; ")
}

// counts are the budgets' places taken, per scope. A budget is counted
// over the fleet the first time a start asks for a place in it: a look
// with nothing queued, and each budget no queued start needs, costs no
// pass over the nodes.
type counts struct {
	nodes  []Node
	counts map[Budget]*budgetCount
	// started are the starts admitted so far this pass, which a budget
	// counted after them counts too.
	started []QueuedStart
	errs    []error
}

// budgetCount is one budget's count in each of its scopes.
type budgetCount struct {
	b Budget
	// taken holds the nodes, or domains, counted in each scope; limit is
	// each scope's limit, -1 when unreadable.
	taken map[string]map[unit]bool
	limit map[string]int
	// full is, per scope, why the budget has no place there, once said.
	full map[string]string
}

// unit is what a budget counts a node as: itself, or its NVLink domain.
type unit struct {
	domain bool
	name   string
}

func newCounts(nodes []Node) *counts {
	return &counts{nodes: nodes, counts: map[Budget]*budgetCount{}}
}

func (c *counts) count(nodes []Node, b Budget) *budgetCount {
	bc := &budgetCount{b: b, taken: map[string]map[unit]bool{}, limit: map[string]int{}}
	// members counts each scope's nodes, a domain once. Each look counts
	// every budget over the fleet: no map of nodes is built for it, and
	// the taken maps only where a node is out of service.
	members := map[string]int{}
	var domains map[string]map[string]bool
	for i := range nodes {
		n := &nodes[i]
		if b.Pool != "" && n.Pool != b.Pool {
			continue
		}
		scope, key := b.scopeOf(n), b.keyOf(n)
		switch {
		case !key.domain:
			members[scope]++
		case !domains[scope][key.name]:
			if domains == nil {
				domains = map[string]map[string]bool{}
			}
			if domains[scope] == nil {
				domains[scope] = map[string]bool{}
			}
			domains[scope][key.name] = true
			members[scope]++
		}
		if b.Counts(n) {
			bc.takeUnit(scope, key)
		}
	}
	for scope, m := range members {
		if b.Unlimited {
			bc.limit[scope] = m + 1
			continue
		}
		limit, err := budget.Nodes(b.Field, b.Limit, m)
		if err != nil {
			bc.limit[scope] = -1
			if scope != "" {
				err = fmt.Errorf("driver pool %s: %w", scope, err)
			}
			c.errs = append(c.errs, err)
			continue
		}
		bc.limit[scope] = limit
	}
	return bc
}

// appliesTo reports whether a budget of the list covers the node: a pool's
// own budget only its pool's nodes, the others' budget only the nodes of
// pools without one.
func appliesTo(b Budget, n *Node, list []Budget) bool {
	switch {
	case b.Pool != "":
		return b.Pool == n.Pool
	case b.Others:
		for _, o := range list {
			if o.Pool != "" && o.Pool == n.Pool {
				return false
			}
		}
	}
	return true
}

// full names the first of budgets that has no place for the node, "" when
// each has one.
func (c *counts) full(n *Node, budgets []Budget) string {
	for _, b := range budgets {
		if !appliesTo(b, n, budgets) {
			continue
		}
		bc := c.find(b)
		scope, key := b.scopeOf(n), b.keyOf(n)
		limit := bc.limit[scope]
		switch {
		case limit < 0:
			return fmt.Sprintf("%s, which cannot be read", b.Field)
		case bc.taken[scope][key]:
			// The node, or its domain, is counted already: no place more.
		case len(bc.taken[scope]) >= limit:
			// Without the count of the moment: the reason is written on
			// the node, and must not change with every node that moves.
			if why, ok := bc.full[scope]; ok {
				return why
			}
			what := "nodes"
			if b.Domains {
				what = "NVLink domains"
			}
			where := ""
			if b.PerPool {
				where = fmt.Sprintf(" of driver pool %s", scope)
			}
			why := fmt.Sprintf("%s (at most %d %s%s out of service at once)", b.Field, limit, what, where)
			if bc.full == nil {
				bc.full = map[string]string{}
			}
			bc.full[scope] = why
			return why
		}
	}
	return ""
}

// take counts a node that starts out of service for op: in op's share,
// and in every budget that counts any hold.
func (c *counts) take(n *Node, op Operation) {
	c.started = append(c.started, QueuedStart{Node: n, Op: op})
	for _, bc := range c.counts {
		bc.takeStart(n, op)
	}
}

func (bc *budgetCount) takeStart(n *Node, op Operation) {
	if !bc.b.share() || bc.b.Op == op {
		bc.takeUnit(bc.b.scopeOf(n), bc.b.keyOf(n))
	}
}

func (bc *budgetCount) takeUnit(scope string, u unit) {
	if bc.taken[scope] == nil {
		bc.taken[scope] = map[unit]bool{}
	}
	bc.taken[scope][u] = true
}

// find returns the budget's count, counting it now if no start asked for
// it before.
func (c *counts) find(b Budget) *budgetCount {
	if bc, ok := c.counts[b]; ok {
		return bc
	}
	bc := c.count(c.nodes, b)
	for _, s := range c.started {
		bc.takeStart(s.Node, s.Op)
	}
	c.counts[b] = bc
	return bc
}

func (b Budget) scopeOf(n *Node) string {
	if b.PerPool {
		return n.Pool
	}
	return ""
}

func (b Budget) keyOf(n *Node) unit {
	if b.Domains && n.Domain != "" {
		return unit{domain: true, name: n.Domain}
	}
	return unit{name: n.Name}
}
