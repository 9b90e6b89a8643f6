package arbiter

import (
	"fmt"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/intstr"
)

var epoch = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// queued returns n nodes of pool default whose op is queued, in name
// order, each waiting since a minute after the one before.
func queued(op Operation, n int) []Node {
	var nodes []Node
	for i := range n {
		v := Node{Name: fmt.Sprintf("n%02d", i), Pool: "default"}
		v.Ops[op] = Position{Phase: Queued, Since: epoch.Add(time.Duration(i) * time.Minute)}
		nodes = append(nodes, v)
	}
	return nodes
}

func upgradeBudgets(parallel int32, unavailable intstr.IntOrString) Budgets {
	var b Budgets
	b[DriverUpgrade] = []Budget{{Field: "driver.upgradePolicy.maxParallelUpgrades", Op: DriverUpgrade, Limit: intstr.FromInt32(parallel),
		Unlimited: parallel == 0, PerPool: true},
		{Field: "driver.upgradePolicy.maxUnavailable", Op: DriverUpgrade, Limit: unavailable, PerPool: true, Unavailable: true}}
	b[Repair] = []Budget{{Field: "operator.remediation.maxParallel", Op: Repair, Limit: intstr.FromInt32(1)}}
	b[MIGReconfiguration] = []Budget{{Field: "migManager.maxParallel", Op: MIGReconfiguration, Limit: intstr.FromInt32(1)}}
	return b
}

func admitted(t *testing.T, nodes []Node, b Budgets) []string {
	t.Helper()
	a, errs := Admit(nodes, b)
	NewWithT(t).Expect(errs).To(BeEmpty())
	var names []string
	for name := range a.Admitted {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

func with(nodes []Node, extra ...Node) []Node { return append(slices.Clone(nodes), extra...) }

func TestAdmitUpgrades(t *testing.T) {
	busy := node("busy", Active)
	repairing := node("repairing", Idle, Active)
	cordoned := node("cordoned")
	cordoned.Unavailable = true
	failed := node("failed", Parked)
	failed.Unavailable = true
	tests := map[string]struct {
		nodes          []Node
		maxParallel    int32
		maxUnavailable intstr.IntOrString
		want           []string
	}{
		"one at a time":           {nodes: queued(DriverUpgrade, 4), maxParallel: 1, maxUnavailable: intstr.FromString("100%"), want: []string{"n00"}},
		"25% of 4 rounds to 1":    {nodes: queued(DriverUpgrade, 4), maxUnavailable: intstr.FromString("25%"), want: []string{"n00"}},
		"25% of 5 rounds up to 2": {nodes: queued(DriverUpgrade, 5), maxUnavailable: intstr.FromString("25%"), want: []string{"n00", "n01"}},
		"10% of 30 is 3":          {nodes: queued(DriverUpgrade, 30), maxUnavailable: intstr.FromString("10%"), want: []string{"n00", "n01", "n02"}},
		"no parallel limit":       {nodes: queued(DriverUpgrade, 3), maxUnavailable: intstr.FromInt32(10), want: []string{"n00", "n01", "n02"}},
		"parallel tighter than room": {nodes: queued(DriverUpgrade, 6), maxParallel: 2, maxUnavailable: intstr.FromInt32(5),
			want: []string{"n00", "n01"}},
		"upgrading nodes use the budget": {nodes: with(queued(DriverUpgrade, 3), busy), maxParallel: 2, maxUnavailable: intstr.FromInt32(4),
			want: []string{"n00"}},
		"cordoned nodes count against maxUnavailable": {nodes: with(queued(DriverUpgrade, 3), cordoned), maxUnavailable: intstr.FromInt32(2),
			want: []string{"n00"}},
		"a failed cordoned node holds its place": {nodes: with(queued(DriverUpgrade, 3), failed), maxUnavailable: intstr.FromInt32(1)},
		"a repair waiting for a reboot costs availability": {nodes: with(queued(DriverUpgrade, 3), node("rebooting", Idle, Parked)),
			maxUnavailable: intstr.FromInt32(1)},
		"but no upgrade place": {nodes: with(queued(DriverUpgrade, 3), node("rebooting", Idle, Parked)), maxParallel: 1,
			maxUnavailable: intstr.FromInt32(2), want: []string{"n00"}},
		// Issue 52, finding 2: a repair takes no upgrade place, but costs
		// availability.
		"nodes under repair take no upgrade place": {nodes: with(queued(DriverUpgrade, 3), repairing), maxParallel: 2,
			maxUnavailable: intstr.FromInt32(4), want: []string{"n00", "n01"}},
		"nodes under repair cost availability": {nodes: with(queued(DriverUpgrade, 3), repairing), maxParallel: 2,
			maxUnavailable: intstr.FromInt32(2), want: []string{"n00"}},
		"budget full": {nodes: with(queued(DriverUpgrade, 2), node("busy", Validating)), maxParallel: 1, maxUnavailable: intstr.FromString("100%")},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			NewWithT(t).Expect(admitted(t, tt.nodes, upgradeBudgets(tt.maxParallel, tt.maxUnavailable))).To(Equal(tt.want))
		})
	}
}

// An already unavailable node costs no availability to upgrade, but
// takes a place in maxParallelUpgrades.
func TestAdmitAnUnavailableNodeForFree(t *testing.T) {
	nodes := queued(DriverUpgrade, 3)
	nodes[1].Unavailable, nodes[2].Unavailable = true, true
	nodes[2].Ops[DriverUpgrade].Phase = Idle
	NewWithT(t).Expect(admitted(t, nodes, upgradeBudgets(0, intstr.FromInt32(2)))).To(Equal([]string{"n01"}))
}

// Finding 4 of issue 25: the longest waiting start goes first, whatever
// its name: a node sent back to the queue waits behind the others.
func TestAdmitLongestWaitingFirst(t *testing.T) {
	nodes := queued(Repair, 3)
	nodes[0].Ops[Repair].Since = epoch.Add(time.Hour) // back in the queue just now
	NewWithT(t).Expect(admitted(t, nodes, upgradeBudgets(1, intstr.FromInt32(1)))).To(Equal([]string{"n01"}))
}

// Each operation's own budget is its share: it counts the nodes that
// operation holds, its parked ones included (issue 52, finding 2), so
// repairs and MIG changes go on during a rollout; maxUnavailable counts
// every hold.
func TestBudgetsAreSharesAndAvailabilityCountsEveryHold(t *testing.T) {
	g := NewWithT(t)
	b := upgradeBudgets(1, intstr.FromString("100%"))
	g.Expect(admitted(t, with(queued(Repair, 2), node("upgrading", Active)), b)).To(Equal([]string{"n00"}),
		"a repair has its own place beside an upgrade")
	g.Expect(admitted(t, with(queued(MIGReconfiguration, 2), node("repairing", Idle, Active)), b)).To(Equal([]string{"n00"}),
		"a MIG change has its own place beside a repair")
	g.Expect(admitted(t, with(queued(Repair, 2), node("rebooting", Idle, Parked)), b)).To(BeEmpty(),
		"a node awaiting its reboot holds the repairs' place")
	g.Expect(admitted(t, with(queued(MIGReconfiguration, 2), node("rebooting", Idle, Parked)), b)).To(Equal([]string{"n00"}),
		"a repair parked holds no MIG place")
	g.Expect(admitted(t, with(queued(DriverUpgrade, 2), node("failed", Parked)), b)).To(BeEmpty(),
		"a failed upgrade keeps its place, as NVIDIA's upgrade counts it")
	g.Expect(admitted(t, with(queued(DriverUpgrade, 2), node("repairing", Idle, Active)), upgradeBudgets(1, intstr.FromInt32(1)))).To(BeEmpty(),
		"maxUnavailable counts a repair")
	g.Expect(admitted(t, queued(MIGReconfiguration, 2), b)).To(Equal([]string{"n00"}))
	// One pass: a repair admitted takes no upgrade place, but the
	// availability an upgrade counts.
	mixed := []Node{node("a"), node("b")}
	mixed[0].Ops[Repair] = Position{Phase: Queued, Since: epoch}
	mixed[1].Ops[DriverUpgrade] = Position{Phase: Queued, Since: epoch.Add(time.Minute)}
	g.Expect(admitted(t, mixed, b)).To(Equal([]string{"a", "b"}), "each in its own share")
	g.Expect(admitted(t, mixed, upgradeBudgets(1, intstr.FromInt32(1)))).To(Equal([]string{"a"}),
		"maxUnavailable counts the repair admitted first")
}

// Finding 2 of issue 52: an upgrade queued behind a full pool budget does
// not hold back its node's repair, which is served as long as it has
// waited; an upgrade with room still goes first on its node.
func TestAQueuedUpgradeDoesNotHoldBackItsNodesRepair(t *testing.T) {
	at := func(n Node, op Operation, minutes int) Node {
		n.Ops[op] = Position{Phase: Queued, Since: epoch.Add(time.Duration(minutes) * time.Minute)}
		return n
	}
	b := upgradeBudgets(1, intstr.FromString("100%"))
	// The other pool's node upgrades: the default pool has room.
	upgrading := node("upgrading", Active)
	upgrading.Pool = "other"
	g := NewWithT(t)

	both := at(at(node("both"), DriverUpgrade, 0), Repair, 5)
	full := node("full", Active) // an upgrade of the default pool holds its one place
	a, errs := Admit([]Node{both, full}, b)
	g.Expect(errs).To(BeEmpty())
	g.Expect(a.Admitted).To(HaveKeyWithValue("both", Repair), "the repair starts while the upgrade waits for its place")

	a, _ = Admit([]Node{both, upgrading}, b)
	g.Expect(a.Admitted).To(HaveKeyWithValue("both", DriverUpgrade), "with room, the upgrade goes first on its node")
	repairFirst := at(at(node("both"), DriverUpgrade, 5), Repair, 0)
	a, _ = Admit([]Node{repairFirst, upgrading}, b)
	g.Expect(a.Admitted).To(HaveKeyWithValue("both", DriverUpgrade), "whichever waited longer: precedence on its node")

	// Served as long as it has waited: another node's repair that waited
	// longer takes the one repair place.
	older := at(node("older"), Repair, 2)
	a, _ = Admit([]Node{both, full, older}, b)
	g.Expect(a.Admitted).To(Equal(map[string]Operation{"older": Repair}))
	g.Expect(a.Waiting["both"]).To(And(ContainSubstring("the driver upgrade waits for"), ContainSubstring("the repair waits for")),
		"both of the node's refusals are told")
}

// A MIG reconfiguration that costs nothing starts without a place, and
// takes none from the others.
func TestAdmitFreeMIG(t *testing.T) {
	nodes := queued(MIGReconfiguration, 3)
	nodes[2].MIGFree = true
	NewWithT(t).Expect(admitted(t, nodes, upgradeBudgets(1, intstr.FromInt32(1)))).To(Equal([]string{"n00", "n02"}))
}

// The NVLink domain cap: a domain with a node out of service takes its
// other nodes for free; another domain waits.
func TestAdmitWithinNVLinkDomains(t *testing.T) {
	g := NewWithT(t)
	b := upgradeBudgets(0, intstr.FromString("100%"))
	cap := Budget{Field: "operator.maintenance.maxUnavailableNVLinkDomains", Op: None, Limit: intstr.FromInt32(1), PerPool: true, Domains: true}
	for op := range NumOperations {
		b[op] = append(b[op], cap)
	}
	nodes := queued(DriverUpgrade, 4)
	nodes[0].Domain, nodes[1].Domain, nodes[2].Domain = "rack-a.1", "rack-b.1", "rack-a.1"
	g.Expect(admitted(t, nodes, b)).To(Equal([]string{"n00", "n02"}), "rack a, then the same rack")
	nodes = append(nodes, node("held-elsewhere", Active))
	nodes[len(nodes)-1].Domain = "rack-b.1"
	g.Expect(admitted(t, nodes, b)).To(Equal([]string{"n01"}), "rack b is disrupted already")
	a, _ := Admit(nodes, b)
	g.Expect(a.Waiting["n00"]).To(ContainSubstring("maxUnavailableNVLinkDomains (at most 1 NVLink domains of driver pool default"))
}

// A budget that cannot be read holds back what it covers, naming its
// field; the others go on.
func TestAdmitRejectsABadBudget(t *testing.T) {
	g := NewWithT(t)
	b := upgradeBudgets(1, intstr.FromString("0%"))
	nodes := with(queued(DriverUpgrade, 2), queued(Repair, 1)[0])
	nodes[2].Name = "sick"
	a, errs := Admit(nodes, b)
	g.Expect(errs).To(ConsistOf(MatchError(ContainSubstring("driver.upgradePolicy.maxUnavailable"))))
	g.Expect(a.Admitted).To(Equal(map[string]Operation{"sick": Repair}))
}

// A pool with upgrade settings of its own (an NVIDIADriver's) upgrades
// within its own budget; the policy's budget covers the other pools only.
func TestPoolsWithTheirOwnBudget(t *testing.T) {
	g := NewWithT(t)
	inPool := func(pool string, nodes []Node) []Node {
		for i := range nodes {
			nodes[i].Pool = pool
			nodes[i].Name = pool + "-" + nodes[i].Name
		}
		return nodes
	}
	nodes := append(inPool("gold", queued(DriverUpgrade, 4)), inPool("silver", queued(DriverUpgrade, 4))...)
	nodes = append(nodes, inPool("bronze", queued(DriverUpgrade, 4))...)
	var b Budgets
	b[DriverUpgrade] = []Budget{
		{Field: "driver.upgradePolicy.maxParallelUpgrades", Op: DriverUpgrade, Limit: intstr.FromInt32(1), PerPool: true, Others: true},
		{Field: "NVIDIADriver gold spec.upgradePolicy.maxParallelUpgrades", Op: DriverUpgrade, Limit: intstr.FromInt32(3),
			PerPool: true, Pool: "gold"},
		{Field: "NVIDIADriver silver spec.upgradePolicy.maxParallelUpgrades", Op: DriverUpgrade, Unlimited: true,
			PerPool: true, Pool: "silver"},
	}
	g.Expect(admitted(t, nodes, b)).To(Equal([]string{"bronze-n00", "gold-n00", "gold-n01", "gold-n02",
		"silver-n00", "silver-n01", "silver-n02", "silver-n03"}))
	a, _ := Admit(nodes, b)
	g.Expect(a.Waiting["gold-n03"]).To(ContainSubstring("NVIDIADriver gold spec.upgradePolicy.maxParallelUpgrades (at most 3 nodes of driver pool gold"))
	g.Expect(a.Waiting["bronze-n01"]).To(ContainSubstring("driver.upgradePolicy.maxParallelUpgrades (at most 1 nodes of driver pool bronze"))

	// Nodes of no pool (held by a conflict) are the others' too: the
	// policy's budget is no pool's own.
	g.Expect(admitted(t, inPool("", queued(DriverUpgrade, 3)), b)).To(HaveLen(1))
}

// Every placement of four nodes in pools of their own budget or of the
// policy's, each already upgrading or queued: after admission no pool has
// more nodes upgrading than its own limit (gold's 2) or the policy's (1
// per pool, the empty pool of held nodes included), and a pool with room
// and a queued node admits one.
func TestPoolBudgetsHoldInEveryPlacement(t *testing.T) {
	pools := []string{"", "gold", "silver"}
	limit := map[string]int{"": 1, "gold": 2, "silver": 1}
	var b Budgets
	b[DriverUpgrade] = []Budget{
		{Field: "policy", Op: DriverUpgrade, Limit: intstr.FromInt32(1), PerPool: true, Others: true},
		{Field: "gold", Op: DriverUpgrade, Limit: intstr.FromInt32(2), PerPool: true, Pool: "gold"},
	}
	cases := 0
	for placement := range 81 { // 3^4
		for active := range 16 { // 2^4
			var nodes []Node
			p := placement
			for i := range 4 {
				n := Node{Name: fmt.Sprintf("n%d", i), Pool: pools[p%3]}
				p /= 3
				n.Ops[DriverUpgrade] = Position{Phase: Queued, Since: epoch}
				if active&(1<<i) != 0 {
					n.Ops[DriverUpgrade].Phase = Active
				}
				nodes = append(nodes, n)
			}
			a, errs := Admit(nodes, b)
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			busy, queued := map[string]int{}, map[string]int{}
			for _, n := range nodes {
				if op, ok := a.Admitted[n.Name]; n.Ops[DriverUpgrade].Phase == Active || (ok && op == DriverUpgrade) {
					busy[n.Pool]++
				} else {
					queued[n.Pool]++
				}
			}
			for _, pool := range pools {
				over := busy[pool] > limit[pool]
				activeAlready := 0
				for _, n := range nodes {
					if n.Pool == pool && n.Ops[DriverUpgrade].Phase == Active {
						activeAlready++
					}
				}
				if over && busy[pool] > activeAlready {
					t.Fatalf("pool %q: %d upgrading, limit %d, after admitting (%+v)", pool, busy[pool], limit[pool], nodes)
				}
				if queued[pool] > 0 && busy[pool] < limit[pool] {
					t.Fatalf("pool %q has room (%d of %d) and a queued node, none admitted (%+v)", pool, busy[pool], limit[pool], nodes)
				}
			}
			cases++
		}
	}
	t.Logf("%d placements checked", cases)
}
