package arbiter

import (
	"time"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/migreconfig"
	"github.com/gpu-operator/gpu-operator/internal/modeswitch"
	"github.com/gpu-operator/gpu-operator/internal/remediation"
	"github.com/gpu-operator/gpu-operator/internal/upgrade"
)

// Operation is a node operation that takes a node out of service.
type Operation int

// The operations, in the order the maintenance controller steps them.
const (
	DriverUpgrade Operation = iota
	Repair
	MIGReconfiguration
	ModeSwitch
	// NumOperations counts the operations; arrays indexed by Operation
	// have this length.
	NumOperations
)

// None is no operation.
const None Operation = -1

func (o Operation) String() string {
	switch o {
	case DriverUpgrade:
		return "driver upgrade"
	case Repair:
		return "repair"
	case MIGReconfiguration:
		return "MIG reconfiguration"
	case ModeSwitch:
		return "allocation mode switch"
	}
	return "none"
}

// withArticle is the operation's name after "a" or "an", for reasons.
func (o Operation) withArticle() string {
	if o == ModeSwitch {
		return "an " + o.String()
	}
	return "a " + o.String()
}

// Phase is where an operation stands on a node, in the words of the table.
type Phase int

// Phases.
const (
	// Idle: the operation neither wants the node nor holds it.
	Idle Phase = iota
	// Queued: the operation wants to start on the node, and waits for the
	// table and the budget.
	Queued
	// Active: the operation holds the node out of service and acts on it;
	// each such step has a timeout.
	Active
	// Validating: the operation holds the node and waits for its GPU stack
	// to come back on the driver it put there; it takes no action.
	Validating
	// Parked: the operation holds the node out of service and waits for a
	// person or a reboot (failed, reboot-required).
	Parked
	// Releasing: the operation holds the node only until it takes back
	// its own marks (a driver upgrade's uncordon): it may always go on.
	Releasing
)

// Holds reports whether an operation in the phase holds the node out of
// service: it takes a place in its operation's share and in the
// availability budgets.
func (p Phase) Holds() bool { return p >= Active }

func (p Phase) String() string {
	return [...]string{"idle", "queued", "active", "validating", "parked", "releasing"}[p]
}

// Position is where an operation stands on a node.
type Position struct {
	Phase Phase
	// Since is when the operation entered its state: the starts that
	// have waited longest go first.
	Since time.Time
}

// UpgradePhase is where a driver upgrade in state st stands. queued says
// whether an upgrade-required node would start on its own (autoUpgrade
// on, not labelled nvidia.com/gpu-driver-upgrade.skip): a held one waits
// for a person, holding nothing.
func UpgradePhase(st gpuv1.UpgradeState, queued bool) Phase {
	switch {
	case st == gpuv1.UpgradeRequired && queued:
		return Queued
	case st == gpuv1.UpgradeValidation:
		return Validating
	case st == gpuv1.UpgradeUncordon:
		return Releasing
	case upgrade.InProgress(st):
		return Active
	case st == gpuv1.UpgradeFailed:
		return Parked
	}
	return Idle
}

// RepairPhase is where a repair in state st stands. queued says whether a
// remediation-required node would start: autoStart or a person's approval,
// the node Ready, and no MIG reconfiguration ended so recently that the
// kubelet still shows its old resource unallocatable.
func RepairPhase(st gpuv1.RemediationState, queued bool) Phase {
	switch {
	case st == gpuv1.RemediationRequired && queued:
		return Queued
	case st == gpuv1.RemediationValidation:
		return Validating
	case remediation.InProgress(st):
		return Active
	case st == gpuv1.RemediationRebootRequired || st == gpuv1.RemediationFailed:
		return Parked
	}
	return Idle
}

// MIGPhase is where a MIG reconfiguration in state st stands. queued says
// whether a reconfigure-required node could start: Ready, its driver and
// toolkit ready, its configuration one the operator can apply.
func MIGPhase(st gpuv1.MIGReconfigureState, queued bool) Phase {
	switch {
	case st == gpuv1.MIGReconfigureRequired && queued:
		return Queued
	case migreconfig.InProgress(st):
		return Active
	case st == gpuv1.MIGReconfigureFailed:
		return Parked
	}
	return Idle
}

// ModeSwitchPhase is where an allocation mode switch in state st stands.
// queued says whether a switch-required node could start: Ready, its
// driver and toolkit ready. A node whose pool's mode the cluster cannot
// run leaves switch-required at its next step.
func ModeSwitchPhase(st gpuv1.ModeSwitchState, queued bool) Phase {
	switch {
	case st == gpuv1.ModeSwitchRequired && queued:
		return Queued
	case st == gpuv1.ModeSwitchPluginOn:
		return Validating
	case modeswitch.InProgress(st):
		return Active
	case st == gpuv1.ModeSwitchFailed:
		return Parked
	}
	return Idle
}

// UpgradeHeld reports whether the driver upgrade will not replace an
// outdated driver on the node on its own: autoUpgrade is off, the node is
// labelled nvidia.com/gpu-driver-upgrade.skip, or its upgrade failed and
// waits for a person. A repair then asks for a reboot rather than wait
// for the upgrade, or reload the outdated driver itself, which would be
// an upgrade without one.
func UpgradeHeld(st gpuv1.UpgradeState, autoUpgrade, skip bool) bool {
	return !autoUpgrade || skip || st == gpuv1.UpgradeFailed
}

// MIGStartsFree reports whether a MIG reconfiguration of a node costs no
// place in a budget: the node never served GPUs (a new node: its device
// plugin was never ready, and nothing is allocatable) or its MIG devices
// are gone, and no GPU pod runs there. Anything else takes GPUs from
// someone, however the node looks at the moment (a device plugin that
// restarts serves nothing for a while).
func MIGStartsFree(everServed, servingNow, lost bool, gpuPods int) bool {
	return (!everServed && !servingNow || lost) && gpuPods == 0
}
