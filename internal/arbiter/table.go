package arbiter

import "fmt"

// Verdict is the table's answer to an operation that wants to start on a
// node another operation holds.
type Verdict int

// Verdicts.
const (
	// Wait: the operation starts once the holder lets the node go.
	Wait Verdict = iota
	// Allow: the operation starts within the holder's hold (a MIG
	// configuration applied again while an upgrade validates its driver).
	Allow
	// TakeOver: the operation starts and acts while the holder, parked,
	// waits for a reboot or a person; the holder goes on from where it
	// is once the operation is done.
	TakeOver
)

func (v Verdict) String() string { return [...]string{"wait", "allow", "take over"}[v] }

// Rule is one row of the holder table.
type Rule struct {
	// Want is the operation that wants to start; Holder the one holding
	// the node, in Phase.
	Want, Holder Operation
	Phase        Phase
	// RestoreOnly makes the row's verdict that of a MIG reconfiguration
	// making the node's devices again (gone with the holder's new driver,
	// a reboot or DynamicMIG; Node.MIGRestore); any other waits.
	RestoreOnly bool
	Verdict     Verdict
	Reason      string
}

// Table is the one place that says which operation may start while
// another holds a node. Rows hold for starts (a queued operation
// admitted, a parked one resuming); an operation already acting goes on,
// and at most one acts (Vet). Every pair of operations and every phase
// in which one can hold a node has its row (a test checks it).
var Table = []Rule{
	// One acts at a time.
	{Want: DriverUpgrade, Holder: Repair, Phase: Active, Verdict: Wait, Reason: "a repair acts on the node"},
	{Want: DriverUpgrade, Holder: MIGReconfiguration, Phase: Active, Verdict: Wait, Reason: "a MIG reconfiguration acts on the node"},
	{Want: Repair, Holder: DriverUpgrade, Phase: Active, Verdict: Wait, Reason: "a driver upgrade acts on the node, and replaces its driver anyway"},
	{Want: Repair, Holder: MIGReconfiguration, Phase: Active, Verdict: Wait, Reason: "a MIG reconfiguration acts on the node"},
	{Want: MIGReconfiguration, Holder: DriverUpgrade, Phase: Active, Verdict: Wait,
		Reason: "a driver upgrade acts on the node: MIG devices made before its new driver would go with the old one"},
	{Want: MIGReconfiguration, Holder: Repair, Phase: Active, Verdict: Wait, Reason: "a repair acts on the node"},

	// A validation waits for the GPU stack: only the MIG devices it waits
	// for may be made meanwhile.
	{Want: Repair, Holder: DriverUpgrade, Phase: Validating, Verdict: Wait, Reason: "a driver upgrade validates its new driver"},
	{Want: MIGReconfiguration, Holder: DriverUpgrade, Phase: Validating, RestoreOnly: true, Verdict: Allow,
		Reason: "the upgrade's new driver destroyed the MIG devices its validation waits for"},
	{Want: DriverUpgrade, Holder: Repair, Phase: Validating, Verdict: Wait, Reason: "a repair validates the node's GPUs"},
	{Want: MIGReconfiguration, Holder: Repair, Phase: Validating, RestoreOnly: true, Verdict: Allow,
		Reason: "the repair's reload or reboot destroyed the MIG devices its validation waits for"},

	// A parked operation waits for a reboot or a person, holding the
	// node: what can only help it may go on.
	{Want: DriverUpgrade, Holder: Repair, Phase: Parked, Verdict: TakeOver,
		Reason: "the repair waits for a reboot or a person; the upgrade replaces the driver meanwhile, which may heal the GPUs"},
	{Want: MIGReconfiguration, Holder: Repair, Phase: Parked, RestoreOnly: true, Verdict: Allow,
		Reason: "the MIG devices a reboot or a new driver destroyed come back while the repair waits: a validation of the node waits for them"},
	{Want: Repair, Holder: DriverUpgrade, Phase: Parked, Verdict: TakeOver,
		Reason: "the driver upgrade failed and keeps its cordon; the repair may still heal the GPUs, and asks for a reboot rather than reload an outdated driver"},
	{Want: MIGReconfiguration, Holder: DriverUpgrade, Phase: Parked, RestoreOnly: true, Verdict: Allow,
		Reason: "the MIG devices a reboot or a new driver destroyed come back while the failed upgrade waits for a person"},
	{Want: DriverUpgrade, Holder: MIGReconfiguration, Phase: Parked, Verdict: Wait,
		Reason: "the MIG reconfiguration failed, and keeps the device plugin off the node that a new driver's validation waits for"},
	{Want: Repair, Holder: MIGReconfiguration, Phase: Parked, Verdict: Wait,
		Reason: "the MIG reconfiguration failed, and keeps the device plugin off the node that a repair's validation waits for"},

	// The upgrade's last step only uncordons.
	{Want: Repair, Holder: DriverUpgrade, Phase: Releasing, Verdict: Wait, Reason: "the driver upgrade uncordons the node first"},
	{Want: MIGReconfiguration, Holder: DriverUpgrade, Phase: Releasing, Verdict: Wait, Reason: "the driver upgrade uncordons the node first"},

	// An allocation mode switch swaps the plugin every other operation's
	// validation reads: it neither starts within another's hold nor lets
	// one start within its own, but for MIG devices to come back.
	{Want: ModeSwitch, Holder: DriverUpgrade, Phase: Active, Verdict: Wait, Reason: "a driver upgrade acts on the node"},
	{Want: ModeSwitch, Holder: DriverUpgrade, Phase: Validating, Verdict: Wait,
		Reason: "a driver upgrade validates its new driver with the plugin the switch would take off"},
	{Want: ModeSwitch, Holder: DriverUpgrade, Phase: Releasing, Verdict: Wait, Reason: "the driver upgrade uncordons the node first"},
	{Want: ModeSwitch, Holder: DriverUpgrade, Phase: Parked, Verdict: Wait,
		Reason: "the driver upgrade failed and waits for a person, who looks at the node as it is"},
	{Want: ModeSwitch, Holder: Repair, Phase: Active, Verdict: Wait, Reason: "a repair acts on the node"},
	{Want: ModeSwitch, Holder: Repair, Phase: Validating, Verdict: Wait, Reason: "a repair validates the node's GPUs with the plugin the switch would take off"},
	{Want: ModeSwitch, Holder: Repair, Phase: Parked, Verdict: Wait,
		Reason: "the repair waits for a reboot or a person, who look at the node as it is"},
	{Want: ModeSwitch, Holder: MIGReconfiguration, Phase: Active, Verdict: Wait, Reason: "a MIG reconfiguration acts on the node: MIG devices in flux"},
	{Want: ModeSwitch, Holder: MIGReconfiguration, Phase: Parked, Verdict: Wait,
		Reason: "the MIG reconfiguration failed, and keeps the plugins off the node that the switch's validation waits for"},
	{Want: DriverUpgrade, Holder: ModeSwitch, Phase: Active, Verdict: Wait, Reason: "an allocation mode switch acts on the node"},
	{Want: DriverUpgrade, Holder: ModeSwitch, Phase: Validating, Verdict: Wait,
		Reason: "an allocation mode switch waits for its new plugin, which a new driver would restart"},
	{Want: DriverUpgrade, Holder: ModeSwitch, Phase: Parked, Verdict: Wait,
		Reason: "the allocation mode switch failed, and left the node without the plugin a new driver's validation waits for"},
	{Want: Repair, Holder: ModeSwitch, Phase: Active, Verdict: Wait, Reason: "an allocation mode switch acts on the node"},
	{Want: Repair, Holder: ModeSwitch, Phase: Validating, Verdict: Wait,
		Reason: "an allocation mode switch waits for its new plugin, whose word on the GPUs the repair reads"},
	{Want: Repair, Holder: ModeSwitch, Phase: Parked, Verdict: Wait,
		Reason: "the allocation mode switch failed, and left the node without the plugin whose word on the GPUs the repair reads"},
	{Want: MIGReconfiguration, Holder: ModeSwitch, Phase: Active, Verdict: Wait, Reason: "an allocation mode switch acts on the node"},
	{Want: MIGReconfiguration, Holder: ModeSwitch, Phase: Validating, RestoreOnly: true, Verdict: Allow,
		Reason: "a reboot or a new driver destroyed the MIG devices the switch's new plugin waits for"},
	{Want: MIGReconfiguration, Holder: ModeSwitch, Phase: Parked, RestoreOnly: true, Verdict: Allow,
		Reason: "the MIG devices a reboot or a new driver destroyed come back while the failed switch waits for a person"},
}

// Precedence is the order in which operations that want to start on the
// same node go, one at a time: a MIG reconfiguration that costs nothing
// (a new node, its GPU stack not started yet: anything else would start
// it on the wrong layout), then a driver upgrade (it replaces the driver
// a repair would reload, and destroys the MIG devices a reconfiguration
// would make), then a repair (healthy GPUs first), then an allocation
// mode switch (a MIG reconfiguration after it is validated by the new
// plugin), then a MIG reconfiguration.
var Precedence = []Operation{MIGReconfiguration, DriverUpgrade, Repair, ModeSwitch, MIGReconfiguration}

// verdict is the table's row for want starting while holder holds the
// node in phase; restore says a MIG start applies its configuration
// again.
func verdict(want, holder Operation, phase Phase, restore bool) (Verdict, string) {
	for _, r := range Table {
		if r.Want != want || r.Holder != holder || r.Phase != phase {
			continue
		}
		if r.RestoreOnly && !restore {
			if phase == Parked {
				return Wait, fmt.Sprintf("the %s waits for a reboot or a person (%s): they look at the node first", holder, phase)
			}
			return Wait, fmt.Sprintf("%s holds the node (%s)", holder.withArticle(), phase)
		}
		return r.Verdict, r.Reason
	}
	// No row: a phase in which the holder cannot be. Waiting is safe.
	return Wait, fmt.Sprintf("%s holds the node (%s)", holder.withArticle(), phase)
}

// mayStart says whether op may start on the node as the others hold it,
// and why not when it may not.
func mayStart(n *Node, op Operation) (bool, string) {
	restore := op == MIGReconfiguration && n.MIGRestore
	for holder := range NumOperations {
		ph := n.Ops[holder].Phase
		if holder == op || !ph.Holds() {
			continue
		}
		if v, reason := verdict(op, holder, ph, restore); v == Wait {
			return false, reason
		}
	}
	return true, ""
}
