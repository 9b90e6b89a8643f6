package maintenance

import (
	"fmt"
	"time"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/arbiter"
	"github.com/gpu-operator/gpu-operator/internal/gating"
	"github.com/gpu-operator/gpu-operator/internal/migreconfig"
	"github.com/gpu-operator/gpu-operator/internal/modeswitch"
	"github.com/gpu-operator/gpu-operator/internal/remediation"
	"github.com/gpu-operator/gpu-operator/internal/upgrade"
)

// The model of a small fleet the exhaustive check explores: what the
// three machines read of each node and what the cluster does around them
// (the DaemonSet controller, the kubelet, mig-manager, kured, people),
// as few facts as tell the machines' states apart. The machines are the
// real ones: their transition tables, the arbiter's table, admission and
// budgets, and the node controller's MIG gate.

const fleetSize = 3

// config is a MIG configuration: none, one that makes MIG devices, one
// that keeps whole GPUs.
type config uint8

const (
	noConfig config = iota
	partitioned
	whole
)

func (c config) String() string { return [...]string{"", "all-1g.18gb", "all-disabled"}[c] }

// healing is what heals a node's unhealthy GPUs.
type healing uint8

const (
	healsOnPluginRestart healing = iota
	healsOnDriverReload
	healsOnReboot
	healsNever
)

// word is mig-manager's nvidia.com/mig.config.state.
type word uint8

const (
	noWord word = iota
	pendingWord
	successWord
	failedWord
)

// node is one node of the fleet.
type node struct {
	// The driver upgrade: its label, and whether it holds the cordon.
	up       upState
	upCordon bool
	// personCordon is a person's cordon (kubectl cordon), which no
	// operation writes or lifts: the node is out of service for the
	// budgets that count availability.
	personCordon bool
	// unlabelled: the node's labels flapped: NFD's PCI label is gone (an
	// nfd-master restart; the node controller keeps gpu.present within its
	// grace) and so are the deploy labels of the driver and mig-manager (a
	// person or a tool deleted them rather than set them to false, which
	// is no opt-out). The node controller writes the deploy labels back.
	unlabelled bool
	// moved: a person relabelled the node into the other driver pool (a
	// fleet with pools). kept is the pool its hold was taken under
	// (AnnotationMaintenancePool, written with the first state write that
	// holds it): 0 while nothing holds it, 1 its first pool, 2 the other.
	moved bool
	kept  uint8
	// The repair: its label and taint, and what its annotations keep.
	rep            repState
	repTaint       bool
	repOldPlugin   bool  // the device plugin pod its restart replaces is still there
	repPodGen      uint8 // the driver pod its reload replaces
	repBootGen     uint8 // the boot it was parked in
	repAfterReboot bool  // its validation follows a reboot
	// The MIG reconfiguration: its label and taint, what its annotations
	// keep, and mig-manager's pod and word.
	mig         migState
	migTaint    bool
	migTarget   config
	migAttempt  uint8
	migRequeues uint8
	migWord     word
	migPod      uint8 // 0 none, 1 the attempt's, 2 another that replaced it
	migBound    bool  // the attempt's pod is recorded
	desired     config
	applied     config
	appliedGen  uint8 // the driver generation its devices were made under
	// appliedDynamic: the node was let go to the DRA driver's DynamicMIG,
	// which destroys the MIG devices it did not make: what is applied is
	// gone (gpuv1.MIGAppliedUnderDynamicMIG) until it is applied again.
	appliedDynamic bool
	// expired: the operation's step ran past its timeout; freeHold: its
	// hold took no place in the budgets (within another's, or a free MIG
	// start).
	expired, freeHold [arbiter.NumOperations]bool
	// excused: a fault on the node that can make an operation fail (a
	// PodDisruptionBudget, mig-manager failing, a step timing out early)
	// explains why one ended failed there.
	excused bool

	// The node: its driver pod (outdated, deleted and not yet replaced),
	// the generations of its boot and driver (mod 4), its GPU stack
	// restarting, its GPUs' health, its GPU pods (a PodDisruptionBudget
	// holding them), and whether its device plugin ever served.
	driverOld, driverGone bool
	driverPodGen          uint8
	gen, bootGen          uint8
	restarting            bool
	unhealthy             bool
	heal                  healing
	unhealthySeen         bool
	pods, pdb             bool
	// pluginReady is the node controller's last word on the plugin of
	// the node's allocation mode; served: one was ready once.
	pluginReady, served bool

	// The allocation mode switch: its label and taint, what its
	// annotations keep; the node's allocation mode label, and whether
	// the DRA driver's ResourceSlices are published for the node.
	sw               swState
	swTaint          bool
	swTarget, swHold mode
	swRequeues       uint8
	mode             mode
	slices           bool
}

// The machines' states, kept as small indices so that a world is small.
type (
	upState  uint8
	repState uint8
	migState uint8
	swState  uint8
)

var (
	upStates = []gpuv1.UpgradeState{"", gpuv1.UpgradeRequired, gpuv1.UpgradeCordonRequired, gpuv1.UpgradeWaitForJobs,
		gpuv1.UpgradePodDeletion, gpuv1.UpgradeDrainRequired, gpuv1.UpgradePodRestart, gpuv1.UpgradeValidation,
		gpuv1.UpgradeUncordon, gpuv1.UpgradeDone, gpuv1.UpgradeFailed}
	repStates = []gpuv1.RemediationState{"", gpuv1.RemediationRequired, gpuv1.RemediationEviction, gpuv1.RemediationDevicePluginRestart,
		gpuv1.RemediationDriverReload, gpuv1.RemediationValidation, gpuv1.RemediationDone, gpuv1.RemediationRebootRequired,
		gpuv1.RemediationFailed}
	migStates = []gpuv1.MIGReconfigureState{"", gpuv1.MIGReconfigureRequired, gpuv1.MIGEviction, gpuv1.MIGClientsOff,
		gpuv1.MIGApply, gpuv1.MIGValidation, gpuv1.MIGReconfigureDone, gpuv1.MIGReconfigureFailed}
)

var swStates = []gpuv1.ModeSwitchState{"", gpuv1.ModeSwitchRequired, gpuv1.ModeSwitchEviction, gpuv1.ModeSwitchPluginsOff,
	gpuv1.ModeSwitchPluginOn, gpuv1.ModeSwitchDone, gpuv1.ModeSwitchFailed}

func (s swState) label() gpuv1.ModeSwitchState { return swStates[s] }

func swOf(l gpuv1.ModeSwitchState) swState { return swState(indexOf(swStates, l)) }

// indexOf is a state label's index in its machine's list of states.
func indexOf[S ~string](states []S, l S) int {
	for i, s := range states {
		if s == l {
			return i
		}
	}
	panic(fmt.Sprintf("no state %q", l))
}

func (s upState) label() gpuv1.UpgradeState         { return upStates[s] }
func (s repState) label() gpuv1.RemediationState    { return repStates[s] }
func (s migState) label() gpuv1.MIGReconfigureState { return migStates[s] }

func upOf(l gpuv1.UpgradeState) upState { return upState(indexOf(upStates, l)) }

func repOf(l gpuv1.RemediationState) repState { return repState(indexOf(repStates, l)) }

func migOf(l gpuv1.MIGReconfigureState) migState { return migState(indexOf(migStates, l)) }

// world is the fleet and the faults still to come.
type world struct {
	// n are the nodes; the first size are the fleet's.
	n    [fleetSize]node
	size uint8
	// faults, spec changes, MIG configuration changes and changes of the
	// pool's allocation mode left to happen.
	faults, specChanges, migChanges, modeChanges, dynamicChanges, poolMoves uint8
	// poolMode is the pool's allocation mode.
	poolMode mode
	// dynamicMIG: the DRA driver in force has DynamicMIG on.
	dynamicMIG bool
}

// now is the model's clock; a step past its timeout started long before.
var (
	now  = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	long = now.Add(-48 * time.Hour)
)

func (n *node) since(op arbiter.Operation) time.Time {
	if n.expired[op] {
		return long
	}
	return now
}

// phase is where an operation stands on the node, as the maintenance
// controller reads it: autoUpgrade and autoStart on, every node Ready, a
// MIG reconfiguration queued once the driver is back and settled.
func (n *node) phase(op arbiter.Operation) arbiter.Phase {
	switch op {
	case arbiter.DriverUpgrade:
		return arbiter.UpgradePhase(n.up.label(), true)
	case arbiter.Repair:
		return arbiter.RepairPhase(n.rep.label(), true)
	case arbiter.ModeSwitch:
		return arbiter.ModeSwitchPhase(n.sw.label(), !n.driverGone)
	}
	return arbiter.MIGPhase(n.mig.label(), !n.driverGone && !n.restarting)
}

// lost: the MIG devices of what is applied are gone with a reboot or a
// new driver.
func (n *node) lost() bool {
	return n.applied == partitioned && n.appliedGen != n.gen || n.appliedDynamic
}

// byDRADriver: the DRA driver's DynamicMIG manages the node's MIG
// devices (gating's migByDRADriver): a node in mode dra while DynamicMIG is
// on, but for an apply under way, which finishes first. mig-manager does
// not run there, no configuration is written, and the maintenance
// controller lets the reconfiguration go.
func (n *node) byDRADriver(dynamic bool) bool {
	return dynamic && n.mode == draMode && n.mig.label() != gpuv1.MIGApply
}

// gate is the node controller's mig-manager state, which gates the device
// plugin.
func (n *node) gate(dynamic bool) gpuv1.StateValue {
	if n.byDRADriver(dynamic) {
		return gpuv1.StateDisabled
	}
	failed := ""
	if n.mig.label() == gpuv1.MIGReconfigureFailed {
		failed = "failed"
	}
	v, _ := gating.MIGGate{State: n.mig.label(), Desired: n.desired.String(), Applied: n.applied.String(), Lost: n.lost(),
		Failed: failed, EverServed: n.served, ServingNow: n.pluginReady}.Value()
	return v
}

// judge is the node controller's look at the node: its allocation mode
// label is the switch's hold, else its pool's where it has nothing to
// lose, else the one it has (gating's allocationMode); the plugin of that
// mode runs where the driver is back, the stack re-formed and mig-manager
// lets it, none in mode none, and the DRA driver's publishes its slices;
// GPUs count as unhealthy only from a plugin that runs.
func (n *node) judge(pool mode, dynamic bool) {
	switch {
	case n.swHold != noMode:
		n.mode = n.swHold
	case n.mode == noneMode && !n.slices:
		n.mode = pool // a none whose hold is gone, nothing of a plugin left
	case n.mode != pool && !n.served && !n.pluginReady && !n.slices:
		n.mode = pool
	}
	v := n.gate(dynamic)
	n.pluginReady = n.mode != noneMode && !n.driverGone && !n.restarting && (v == gpuv1.StateReady || v == gpuv1.StateDisabled)
	if n.pluginReady {
		n.served = true
		n.unhealthySeen = n.unhealthy
		n.slices = n.slices || n.mode == draMode
	}
}

// The machines' policies: timeouts the model's clock either meets or
// runs past. The budgets are the controller's (newJudge).
var (
	upgradePolicy = upgrade.Policy{AutoUpgrade: true, WaitTimeout: time.Hour, PodDeletionTimeout: time.Hour, DrainTimeout: time.Hour,
		ValidationTimeout: time.Hour, PodRestartTimeout: time.Hour}
	repairPolicy = remediation.Policy{AutoStart: true, EvictionTimeout: time.Hour, ValidationTimeout: time.Hour,
		DriverReplaceTimeout: time.Hour, RecurrenceWindow: time.Hour}
	switchPolicy = modeswitch.Policy{EvictionTimeout: time.Hour, PluginsOffTimeout: time.Hour, ValidationTimeout: time.Hour}
	migPolicy    = migreconfig.Policy{EvictionTimeout: time.Hour, ApplyTimeout: time.Hour, ValidationTimeout: time.Hour,
		InPlaceWait: time.Hour, ClientsOffTimeout: time.Hour, RetryBackoff: time.Minute}
)
