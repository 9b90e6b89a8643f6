package timers

import (
	"flag"
	"fmt"
	"time"
)

// Timers are the waits of the node controller, the maintenance controller
// and the transition tables they drive. Each is a flag of the operator;
// Defaults are the production values.
type Timers struct {
	// ReadyGrace is how long a ready state survives its pod being not
	// ready or gone before the states after it restart.
	ReadyGrace time.Duration
	// DriverRestartGrace is how long a ready driver state survives its
	// pod restarting in place (its configuration unchanged, the modules
	// kept): the old pod's end, the new one's start and its startup
	// probe's first check, a minute after it starts.
	DriverRestartGrace time.Duration
	// NFDGrace is how long a GPU node whose NFD labels went stays one, its
	// labels, operands and operations in flight kept: NFD's labels flap
	// when nfd-master restarts.
	NFDGrace time.Duration
	// HealthSettle is how long a device plugin pod must have been ready
	// before its word on the GPUs counts: the kubelet reports allocatable
	// again only at its next status update after the plugin registers.
	HealthSettle time.Duration
	// GPUPodsRecheck is how often a node whose device plugin
	// configuration waits for its GPU pods to go counts them again: the
	// node controller does not watch workload pods.
	GPUPodsRecheck time.Duration
	// WorkloadRetry is how long after a CUDA workload pod ended, failed
	// or not run by the kubelet (no GPU free), a new one tries again: a
	// Fabric Manager restarted on the host, or a GPU freed, is found
	// without anyone acting.
	WorkloadRetry time.Duration
	// WorkloadSlotPoll is how often a node whose CUDA workload waits for
	// the bound on proofs running at once looks for a free place.
	WorkloadSlotPoll time.Duration
	// TaintRetry is how soon a readiness taint the API server refused is
	// tried again.
	TaintRetry time.Duration
	// MaintenancePoll is how often nodes in a maintenance step (a driver
	// upgrade, a MIG reconfiguration, a repair) are looked at again: their
	// GPU pods are listed live, not watched, and their timeouts run.
	MaintenancePoll time.Duration
	// MaintenanceFullLook is how often a maintenance look judges every
	// node again, the quiet ones included, whose judgement it otherwise
	// keeps while their inputs stay the same.
	MaintenanceFullLook time.Duration
	// KubeletResourceGrace is how long the kubelet keeps a resource whose
	// device plugin stopped advertising it, unallocatable, in the node's
	// capacity (its devicemanager's endpointStopGracePeriod, 5 minutes):
	// after a MIG reconfiguration the old resource looks like unhealthy
	// GPUs until then, and no repair may start on it.
	KubeletResourceGrace time.Duration
	// DriverValidationTimeout bounds how long a driver upgrade's new
	// driver may take to be ready with the device plugin advertising the
	// GPUs again. It must exceed the driver container's startup budget (a
	// test in the driver state pins the default).
	DriverValidationTimeout time.Duration
	// DriverReplaceTimeout bounds how long the operands after the driver
	// may take to leave a node and its driver pod to be replaced, in a
	// driver upgrade and in a repair's driver reload.
	DriverReplaceTimeout time.Duration
	// RepairRecurrenceWindow is how soon after a repair GPUs unhealthy
	// again show that restarts do not hold: the next repair goes from the
	// eviction straight to reboot-required.
	RepairRecurrenceWindow time.Duration
	// MIGInPlaceWait bounds how long a serving node with no MIG
	// configuration known applied waits for its device plugin and GFD to
	// settle, to learn whether it has the requested layout already.
	MIGInPlaceWait time.Duration
	// MIGClientsOffTimeout bounds how long the device plugin, GFD and
	// dcgm-exporter may take to leave a node being reconfigured.
	MIGClientsOffTimeout time.Duration
	// MIGRetryBackoff is how long after its start a failed MIG apply
	// attempt is retried, doubling after each attempt.
	MIGRetryBackoff time.Duration
	// MIGApplyTimeoutFloor is the shortest apply timeout the operator
	// gives mig-manager, whatever migManager.applyTimeoutSeconds says:
	// mig-parted stops the GPU clients and walks every GPU.
	MIGApplyTimeoutFloor time.Duration
	// ModeSwitchTimeout bounds an allocation mode switch's eviction of
	// the GPU pods, where the pool's driver upgrade sets no podDeletion
	// timeout, and how long the plugin of the old mode and its
	// ResourceSlices may take to leave the node.
	ModeSwitchTimeout time.Duration
	// LeaseDuration, RenewDeadline and RetryPeriod time the leader
	// election: how long a lease a stopped leader held blocks the next
	// one, how long the leader tries to renew before it gives up, and how
	// often candidates try.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// GFDLabelsWait bounds how long the cleanup of a deleted ClusterPolicy
	// waits, from the deletion, for GFD's pods to go and NFD to remove
	// the labels they published (nfd-worker reads GFD's file once a
	// minute) before it deletes NFD; where NFD is the operator's, it then
	// removes the labels left itself.
	GFDLabelsWait time.Duration
}

// Defaults returns the production timers.
func Defaults() Timers {
	return Timers{
		ReadyGrace:              30 * time.Second,
		DriverRestartGrace:      5 * time.Minute,
		NFDGrace:                5 * time.Minute,
		HealthSettle:            30 * time.Second,
		GPUPodsRecheck:          20 * time.Second,
		WorkloadRetry:           5 * time.Minute,
		WorkloadSlotPoll:        10 * time.Second,
		TaintRetry:              30 * time.Second,
		MaintenancePoll:         5 * time.Second,
		MaintenanceFullLook:     5 * time.Minute,
		KubeletResourceGrace:    6 * time.Minute,
		DriverValidationTimeout: 30 * time.Minute,
		DriverReplaceTimeout:    10 * time.Minute,
		RepairRecurrenceWindow:  time.Hour,
		MIGInPlaceWait:          2 * time.Minute,
		MIGClientsOffTimeout:    10 * time.Minute,
		MIGRetryBackoff:         15 * time.Second,
		MIGApplyTimeoutFloor:    time.Minute,
		ModeSwitchTimeout:       10 * time.Minute,
		// controller-runtime's own defaults.
		LeaseDuration: 15 * time.Second,
		RenewDeadline: 10 * time.Second,
		RetryPeriod:   2 * time.Second,
		GFDLabelsWait: 2 * time.Minute,
	}
}

// BindFlags registers a flag for each timer, defaulting to the value t
// holds.
func (t *Timers) BindFlags(fs *flag.FlagSet) {
	for _, f := range t.flags() {
		fs.DurationVar(f.value, f.name, *f.value, f.usage)
	}
}

// Args returns the operator's command-line flags that set every timer to
// t's value: how tests and the simulated cluster run the binary.
func (t Timers) Args() []string {
	var args []string
	for _, f := range t.flags() {
		args = append(args, fmt.Sprintf("--%s=%s", f.name, *f.value))
	}
	return args
}

// Validate says which timer is out of range, naming its flag.
func (t Timers) Validate() error {
	for _, f := range t.flags() {
		if *f.value <= 0 {
			return fmt.Errorf("--%s=%s: must be positive", f.name, *f.value)
		}
	}
	if t.RenewDeadline >= t.LeaseDuration {
		return fmt.Errorf("--leader-elect-renew-deadline=%s must be less than --leader-elect-lease-duration=%s", t.RenewDeadline, t.LeaseDuration)
	}
	if t.RetryPeriod >= t.RenewDeadline {
		return fmt.Errorf("--leader-elect-retry-period=%s must be less than --leader-elect-renew-deadline=%s", t.RetryPeriod, t.RenewDeadline)
	}
	return nil
}

// timerFlag is a timer's flag.
type timerFlag struct {
	name  string
	value *time.Duration
	usage string
}

// flags pairs each timer with its flag.
func (t *Timers) flags() []timerFlag {
	return []timerFlag{
		{"ready-grace-period", &t.ReadyGrace, "How long a ready state survives its pod being not ready or gone before the states after it restart."},
		{"driver-restart-grace", &t.DriverRestartGrace,
			"How long a ready driver survives its pod restarting in place (the same configuration, the modules kept) before the states after it restart."},
		{"nfd-grace-period", &t.NFDGrace,
			"How long a GPU node whose NFD labels went stays one, its operands and any operation in flight kept, in case they come back (an nfd-master restart)."},
		{"health-settle", &t.HealthSettle,
			"How long a device plugin pod must have been ready before its word on the GPUs counts (the kubelet reports allocatable at its next status update)."},
		{"gpu-pods-recheck", &t.GPUPodsRecheck, "How often a node whose device plugin configuration waits for its GPU pods counts them again."},
		{"workload-retry", &t.WorkloadRetry,
			"How long after a CUDA workload proof failed, or was not run by the kubelet, a new one tries again on its node."},
		{"workload-slot-poll", &t.WorkloadSlotPoll,
			"How often a node whose CUDA workload proof waits for the bound on proofs running at once (--workload-proofs) looks for a free place."},
		{"taint-retry", &t.TaintRetry, "How soon a readiness taint the API server refused is tried again."},
		{"maintenance-poll", &t.MaintenancePoll, "How often nodes in a driver upgrade, MIG reconfiguration or repair step are looked at again."},
		{"maintenance-full-look", &t.MaintenanceFullLook,
			"How often a maintenance look judges every GPU node again, including those whose inputs did not change since they were last judged."},
		{"kubelet-resource-grace", &t.KubeletResourceGrace,
			"How long after a MIG reconfiguration no repair starts or judges the GPUs: the kubelet keeps the old resource, unallocatable, for 5 minutes."},
		{"driver-validation-timeout", &t.DriverValidationTimeout,
			"How long an upgraded driver may take to be ready with the GPUs advertised again before the node's upgrade fails; more than the driver container's startup budget (21 minutes)."},
		{"driver-replace-timeout", &t.DriverReplaceTimeout,
			"How long the operands after the driver may take to leave a node and its driver pod to be replaced, in an upgrade or a repair."},
		{"repair-recurrence-window", &t.RepairRecurrenceWindow, "GPUs unhealthy again this soon after a repair go straight to reboot-required."},
		{"mig-in-place-wait", &t.MIGInPlaceWait, "How long a serving node waits for its device plugin and GFD to say whether it has its MIG layout already."},
		{"mig-clients-off-timeout", &t.MIGClientsOffTimeout, "How long the device plugin, GFD and dcgm-exporter may take to leave a node being reconfigured."},
		{"mig-retry-backoff", &t.MIGRetryBackoff, "How long after its start a failed MIG apply attempt is retried, doubling after each attempt."},
		{"mig-apply-timeout-floor", &t.MIGApplyTimeoutFloor, "The shortest apply timeout mig-manager gets, whatever migManager.applyTimeoutSeconds says."},
		{"mode-switch-timeout", &t.ModeSwitchTimeout,
			"How long an allocation mode switch may take to evict the GPU pods (where the pool's upgrade sets no podDeletion timeout), and the old plugin to leave."},
		{"leader-elect-lease-duration", &t.LeaseDuration,
			"How long a leader's lease lasts: a leader that stopped without releasing it blocks the next one this long."},
		{"leader-elect-renew-deadline", &t.RenewDeadline, "How long the leader tries to renew its lease before it gives up leading; less than the lease duration."},
		{"leader-elect-retry-period", &t.RetryPeriod, "How often leader candidates try to take or renew the lease."},
		{"gfd-labels-wait", &t.GFDLabelsWait,
			"How long the cleanup of a deleted ClusterPolicy waits for NFD to remove GFD's labels before it deletes NFD (and removes what is left, if NFD is the operator's)."},
	}
}
