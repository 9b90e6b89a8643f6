package arbiter

import (
	"testing"

	. "github.com/onsi/gomega"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
)

// holdingPhases are the phases in which each operation can hold a node,
// read off its states.
func holdingPhases() map[Operation][]Phase {
	out := map[Operation][]Phase{}
	add := func(op Operation, ph Phase) {
		if ph.Holds() {
			for _, seen := range out[op] {
				if seen == ph {
					return
				}
			}
			out[op] = append(out[op], ph)
		}
	}
	for _, st := range []gpuv1.UpgradeState{gpuv1.UpgradeCordonRequired, gpuv1.UpgradeWaitForJobs, gpuv1.UpgradePodDeletion,
		gpuv1.UpgradeDrainRequired, gpuv1.UpgradePodRestart, gpuv1.UpgradeValidation, gpuv1.UpgradeUncordon, gpuv1.UpgradeFailed} {
		add(DriverUpgrade, UpgradePhase(st, true))
	}
	for _, st := range []gpuv1.RemediationState{gpuv1.RemediationEviction, gpuv1.RemediationDevicePluginRestart, gpuv1.RemediationDriverReload,
		gpuv1.RemediationValidation, gpuv1.RemediationRebootRequired, gpuv1.RemediationFailed} {
		add(Repair, RepairPhase(st, true))
	}
	for _, st := range []gpuv1.MIGReconfigureState{gpuv1.MIGEviction, gpuv1.MIGClientsOff, gpuv1.MIGApply, gpuv1.MIGValidation,
		gpuv1.MIGReconfigureFailed} {
		add(MIGReconfiguration, MIGPhase(st, true))
	}
	for _, st := range []gpuv1.ModeSwitchState{gpuv1.ModeSwitchEviction, gpuv1.ModeSwitchPluginsOff, gpuv1.ModeSwitchPluginOn,
		gpuv1.ModeSwitchFailed} {
		add(ModeSwitch, ModeSwitchPhase(st, true))
	}
	return out
}

// Every operation that wants a node another holds, in every phase it can
// hold it, has exactly one row, with a reason a person can read.
func TestTableIsComplete(t *testing.T) {
	g := NewWithT(t)
	holding := holdingPhases()
	rows := 0
	for want := range NumOperations {
		for holder := range NumOperations {
			if want == holder {
				continue
			}
			for _, ph := range holding[holder] {
				var found []Rule
				for _, r := range Table {
					if r.Want == want && r.Holder == holder && r.Phase == ph {
						found = append(found, r)
					}
				}
				g.Expect(found).To(HaveLen(1), "%s wants a node a %s holds (%s)", want, holder, ph)
				g.Expect(found[0].Reason).NotTo(BeEmpty())
				rows++
			}
		}
	}
	g.Expect(Table).To(HaveLen(rows), "no row for a phase an operation cannot hold a node in")
	t.Logf("%d rows", rows)
}

// Each phase an operation's states map to, as the table reads them.
func TestPhases(t *testing.T) {
	g := NewWithT(t)
	g.Expect(UpgradePhase(gpuv1.UpgradeRequired, true)).To(Equal(Queued))
	g.Expect(UpgradePhase(gpuv1.UpgradeRequired, false)).To(Equal(Idle), "held back by a person: it wants nothing")
	g.Expect(UpgradePhase(gpuv1.UpgradePodDeletion, true)).To(Equal(Active))
	g.Expect(UpgradePhase(gpuv1.UpgradeValidation, true)).To(Equal(Validating))
	g.Expect(UpgradePhase(gpuv1.UpgradeUncordon, true)).To(Equal(Releasing))
	g.Expect(UpgradePhase(gpuv1.UpgradeFailed, true)).To(Equal(Parked))
	g.Expect(UpgradePhase(gpuv1.UpgradeDone, true)).To(Equal(Idle))
	g.Expect(RepairPhase(gpuv1.RemediationRebootRequired, true)).To(Equal(Parked))
	g.Expect(RepairPhase(gpuv1.RemediationValidation, true)).To(Equal(Validating))
	g.Expect(RepairPhase(gpuv1.RemediationDriverReload, true)).To(Equal(Active))
	g.Expect(MIGPhase(gpuv1.MIGValidation, true)).To(Equal(Active))
	g.Expect(MIGPhase(gpuv1.MIGReconfigureFailed, true)).To(Equal(Parked))
	g.Expect(MIGPhase(gpuv1.MIGReconfigureRequired, false)).To(Equal(Idle))
	g.Expect(ModeSwitchPhase(gpuv1.ModeSwitchRequired, true)).To(Equal(Queued))
	g.Expect(ModeSwitchPhase(gpuv1.ModeSwitchRequired, false)).To(Equal(Idle))
	g.Expect(ModeSwitchPhase(gpuv1.ModeSwitchEviction, true)).To(Equal(Active))
	g.Expect(ModeSwitchPhase(gpuv1.ModeSwitchPluginsOff, true)).To(Equal(Active))
	g.Expect(ModeSwitchPhase(gpuv1.ModeSwitchPluginOn, true)).To(Equal(Validating))
	g.Expect(ModeSwitchPhase(gpuv1.ModeSwitchFailed, true)).To(Equal(Parked))
	g.Expect(ModeSwitchPhase(gpuv1.ModeSwitchDone, true)).To(Equal(Idle))
}

func node(name string, phases ...Phase) Node {
	n := Node{Name: name, Pool: "default"}
	for op, ph := range phases {
		n.Ops[op].Phase = ph
	}
	return n
}

// The operations that may start on a node, before the budget.
func TestCandidates(t *testing.T) {
	freeMIG := func(n Node) Node { n.MIGFree = true; return n }
	restore := func(n Node) Node { n.MIGRestore = true; return n }
	tests := map[string]struct {
		node Node
		want []Operation
		free bool
		wait map[Operation]string
	}{
		"nothing wants the node": {node: node("n")},
		"an upgrade":             {node: node("n", Queued), want: []Operation{DriverUpgrade}},
		// Finding 2 of issue 52: the repair is the upgrade's alternative,
		// not held back by it.
		"an upgrade, then a repair":   {node: node("n", Queued, Queued), want: []Operation{DriverUpgrade, Repair}},
		"a repair, then a MIG change": {node: node("n", Idle, Queued, Queued), want: []Operation{Repair, MIGReconfiguration}},
		"a new node's MIG layout first, alone": {node: freeMIG(node("n", Queued, Idle, Queued)), want: []Operation{MIGReconfiguration}, free: true,
			wait: map[Operation]string{DriverUpgrade: "a MIG reconfiguration goes first"}},
		// Finding 1 of issue 25: the upgrade starts on a node whose repair
		// waits for a reboot. It takes a place of its own: the parked
		// repair holds none of the upgrade's.
		"an upgrade takes over a parked repair": {node: node("n", Queued, Parked), want: []Operation{DriverUpgrade}},
		"a repair of a failed upgrade's node":   {node: node("n", Parked, Queued), want: []Operation{Repair}},
		"nothing while one acts":                {node: node("n", Active, Queued, Queued)},
		"the MIG devices a validation waits for": {node: restore(node("n", Validating, Idle, Queued)),
			want: []Operation{MIGReconfiguration}},
		"no other MIG change while an upgrade validates": {node: node("n", Validating, Idle, Queued)},
		"a MIG change waits for a failed upgrade":        {node: node("n", Parked, Idle, Queued)},
		"a repair, then a switch":                        {node: node("n", Idle, Queued, Idle, Queued), want: []Operation{Repair, ModeSwitch}},
		"a switch, then a MIG change": {node: node("n", Idle, Idle, Queued, Queued),
			want: []Operation{ModeSwitch, MIGReconfiguration}},
		"no upgrade while a switch validates": {node: node("n", Queued, Idle, Idle, Validating),
			wait: map[Operation]string{DriverUpgrade: "waits for its new plugin"}},
		"the MIG devices a switch's new plugin waits for": {node: restore(node("n", Idle, Idle, Queued, Validating)),
			want: []Operation{MIGReconfiguration}},
		"no switch while a MIG change failed": {node: node("n", Idle, Idle, Parked, Queued)},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			starts, waits := Candidates(&tt.node)
			var ops []Operation
			for i, s := range starts {
				ops = append(ops, s.Op)
				g.Expect(s.Free).To(Equal(tt.free && i == 0), "start %d", i)
			}
			g.Expect(ops).To(Equal(tt.want))
			for op, why := range tt.wait {
				g.Expect(waits).To(HaveKeyWithValue(op, ContainSubstring(why)))
			}
		})
	}
}

// What an operation may do as the others stand.
func TestVet(t *testing.T) {
	tests := map[string]struct {
		node     Node
		op       Operation
		from, to Phase
		admitted Operation
		ok       bool
	}{
		"letting go":                 {node: node("n", Active, Active), op: Repair, from: Active, to: Idle, ok: true},
		"uncordoning":                {node: node("n", Validating, Active), op: DriverUpgrade, from: Validating, to: Releasing, ok: true},
		"a start admitted":           {node: node("n", Queued), op: DriverUpgrade, from: Queued, to: Active, admitted: DriverUpgrade, ok: true},
		"a start not admitted":       {node: node("n", Queued), op: DriverUpgrade, from: Queued, to: Active, admitted: None},
		"going on alone":             {node: node("n", Active), op: DriverUpgrade, from: Active, to: Active, admitted: None, ok: true},
		"acting after a validation":  {node: node("n", Validating, Idle, Active), op: DriverUpgrade, from: Validating, to: Active, admitted: None},
		"two act: the first goes on": {node: node("n", Active, Active), op: DriverUpgrade, from: Active, to: Active, ok: true},
		"two act: the second waits":  {node: node("n", Active, Active), op: Repair, from: Active, to: Active},
		"rebooted: validating":       {node: node("n", Active, Parked), op: Repair, from: Parked, to: Validating, ok: true},
		"approved again, alone":      {node: node("n", Idle, Parked), op: Repair, from: Parked, to: Active, admitted: None, ok: true},
		"approved again, upgrading":  {node: node("n", Active, Parked), op: Repair, from: Parked, to: Active, admitted: None},
		"approved, an upgrade first": {node: node("n", Queued, Parked), op: Repair, from: Parked, to: Active, admitted: DriverUpgrade},
		// Finding 2 of issue 52: an upgrade that waits for a place does
		// not hold back the node's repair.
		"approved, an upgrade waits for a place": {node: node("n", Queued, Parked), op: Repair, from: Parked, to: Active, admitted: None, ok: true},
		"parking":                                {node: node("n", Active), op: DriverUpgrade, from: Active, to: Parked, ok: true},
		"validating, acting again":               {node: node("n", Validating), op: DriverUpgrade, from: Validating, to: Active, admitted: None, ok: true},
		"validating, acting again beside a start": {node: node("n", Validating, Idle, Queued), op: DriverUpgrade, from: Validating, to: Active,
			admitted: MIGReconfiguration},
		"a switch retargets beside a MIG restore": {node: node("n", Idle, Idle, Queued, Validating), op: ModeSwitch, from: Validating, to: Active,
			admitted: MIGReconfiguration},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			ok, why := Vet(&tt.node, tt.op, tt.from, tt.to, tt.admitted)
			NewWithT(t).Expect(ok).To(Equal(tt.ok), why)
			if !ok {
				NewWithT(t).Expect(why).NotTo(BeEmpty())
			}
		})
	}
}

// Finding 4 of issue 25: a failed upgrade replaces no driver on its own;
// a repair of the node must not wait for it (required, eviction, plugin
// restart, "the upgrade replaces it first", required, for ever) but ask for
// a reboot.
func TestUpgradeHeld(t *testing.T) {
	g := NewWithT(t)
	g.Expect(UpgradeHeld(gpuv1.UpgradeFailed, true, false)).To(BeTrue(), "failed, waiting for a person")
	g.Expect(UpgradeHeld(gpuv1.UpgradeRequired, false, false)).To(BeTrue(), "autoUpgrade off")
	g.Expect(UpgradeHeld(gpuv1.UpgradeRequired, true, true)).To(BeTrue(), "skipped")
	g.Expect(UpgradeHeld(gpuv1.UpgradeRequired, true, false)).To(BeFalse(), "due: it goes first")
	g.Expect(UpgradeHeld("", true, false)).To(BeFalse(), "not marked yet: it will be")
}
