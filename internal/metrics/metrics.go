package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the operator's own metrics. controller-runtime adds its
// controller_runtime_* and client-go's rest_client_* metrics alongside.
type Metrics struct {
	// Reconciles counts reconciles by controller and result (success,
	// error).
	Reconciles *prometheus.CounterVec
	// GPUNodes is the number of GPU nodes the active policy covers.
	GPUNodes prometheus.Gauge
	// Nodes counts GPU nodes by state and the value of its label there.
	Nodes *prometheus.GaugeVec
	// NodeReadySeconds is how long nodes took from discovery, or from
	// their return from a reboot, to every state ready.
	NodeReadySeconds prometheus.Histogram

	// Driver upgrades.
	AutoUpgradeEnabled prometheus.Gauge
	UpgradesPending    prometheus.Gauge
	UpgradesInProgress prometheus.Gauge
	UpgradesDone       prometheus.Gauge
	UpgradesFailed     prometheus.Gauge
	UpgradesAvailable  prometheus.Gauge
	// UnhealthyGPUs is gpu_operator_unhealthy_gpus, per node with any.
	UnhealthyGPUs *NodeGauge
	// NotReadyNodes is 1 per GPU node not ready on every state, labelled
	// with the first state of the chain that is not (node, state): what
	// the alert on a node not ready for long reads.
	NotReadyNodes *SetGauge[[2]string]
	// PoolNodes and PoolReadyNodes count each driver pool's GPU nodes, and
	// those ready on every state.
	PoolNodes, PoolReadyNodes *SetGauge[string]
	// MaintenanceNodes counts the GPU nodes an operation's label records
	// in a state other than done (operation, state).
	MaintenanceNodes *SetGauge[[2]string]
	// MaintenanceWaiting counts the GPU nodes a queued operation waits to
	// start on (the budget, a domain's cap, another operation).
	MaintenanceWaiting prometheus.Gauge
}

// New creates the metrics and registers them on reg.
func New(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		Reconciles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gpu_operator_reconciles_total",
			Help: "Reconciles by controller and result (success or error).",
		}, []string{"controller", "result"}),
		GPUNodes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gpu_operator_gpu_nodes",
			Help: "GPU nodes covered by the active ClusterPolicy.",
		}),
		Nodes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "gpu_operator_nodes",
			Help: "GPU nodes by state and phase (pending, ready, failed, upgrading, disabled).",
		}, []string{"state", "phase"}),
		NodeReadySeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "gpu_operator_node_ready_seconds",
			Help:    "Seconds from a GPU node's discovery, or its return from a reboot, until every state was ready on it.",
			Buckets: prometheus.ExponentialBuckets(5, 2, 10),
		}),
		AutoUpgradeEnabled: gauge("gpu_operator_auto_upgrade_enabled", "1 when driver.upgradePolicy.autoUpgrade is on."),
		UpgradesPending:    gauge("gpu_operator_nodes_upgrades_pending", "GPU nodes labelled upgrade-required."),
		UpgradesInProgress: gauge("gpu_operator_nodes_upgrades_in_progress", "GPU nodes between cordon and uncordon of a driver upgrade."),
		UpgradesDone:       gauge("gpu_operator_nodes_upgrades_done", "GPU nodes labelled upgrade-done."),
		UpgradesFailed:     gauge("gpu_operator_nodes_upgrades_failed", "GPU nodes labelled upgrade-failed."),
		UpgradesAvailable:  gauge("gpu_operator_nodes_upgrades_available", "GPU nodes available for workloads: not in an upgrade and not failed."),
		UnhealthyGPUs: NewNodeGauge("gpu_operator_unhealthy_gpus",
			"GPUs the device plugin reports unhealthy (allocatable below capacity), per GPU node that has any."),
		NotReadyNodes: NewPairGauge("gpu_operator_node_not_ready",
			"1 for each GPU node not ready on every state, with the first state of the chain that is not ready there.", "node", "state"),
		PoolNodes: NewLabelGauge("gpu_operator_pool_gpu_nodes",
			"GPU nodes per driver pool (the NVIDIADriver that selects them; default under the ClusterPolicy).", "pool"),
		PoolReadyNodes: NewLabelGauge("gpu_operator_pool_ready_nodes",
			"GPU nodes ready on every state, per driver pool.", "pool"),
		MaintenanceNodes: NewPairGauge("gpu_operator_maintenance_nodes",
			"GPU nodes per maintenance operation (upgrade, repair, mode-switch, mig-reconfigure) and its state on them, done excluded.",
			"operation", "state"),
		MaintenanceWaiting: gauge("gpu_operator_maintenance_waiting_nodes",
			"GPU nodes a queued maintenance operation waits to start on; kubectl gpu status says why."),
	}
	for _, c := range []prometheus.Collector{m.Reconciles, m.GPUNodes, m.Nodes, m.NodeReadySeconds,
		m.AutoUpgradeEnabled, m.UpgradesPending, m.UpgradesInProgress, m.UpgradesDone, m.UpgradesFailed, m.UpgradesAvailable, m.UnhealthyGPUs, m.NotReadyNodes, m.PoolNodes, m.PoolReadyNodes, m.MaintenanceNodes,
		m.MaintenanceWaiting} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Result is the result label of a reconcile.
func Result(err error) string {
	if err != nil {
		return "error"
	}
	return "success"
}

func gauge(name, help string) prometheus.Gauge {
	return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
}
