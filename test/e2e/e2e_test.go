//go:build e2e

package e2e

import (
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
)

// nvidiaValues is NVIDIA's chart's default values file (test/packaging keeps
// it, and says where it comes from).
const nvidiaValues = "test/packaging/testdata/nvidia-v26.7.0-values.yaml"

// documented is the README's install command.
var documented = []string{"--set", "driver.enabled=true", "--set", "driver.version=535.154.05"}

// Every container starts from what it needs (the chart installed as the
// README says, or not installed), whatever ran before it, so that any one
// spec runs alone: `make test-e2e FOCUS='MIG'`. Each spec in an installed
// container leaves the cluster as it found it (restore.go). make test-e2e
// runs the containers in E2E_PROCS processes, each on its own cluster, a
// container on one process from its first spec to its last, each process
// taking the next container when it is done with one. So the installed
// containers come longest first, and the processes finish together (in
// one run: runtime settings 231 s, reboots 183, NVIDIADrivers 170, node
// pools 147, GPU sharing 132, operator crashes 92, rollout 90). The
// ReportAfterSuite line's time is how long the first process to finish
// waited for the last. The outer container only keeps that order, which
// Ginkgo would otherwise shuffle: the uninstalling ones last, so that
// each process installs the chart once, and among them too the longest
// first.
var _ = Describe("gpu-operator on a simulated GPU cluster", func() {
	var healthy []string
	// stuck are the nodes that never get ready: out of driver upgrades.
	// Nodes whose stack does not come up under the default values: the
	// driver never loads, the runtime is elsewhere or never configured,
	// the host keeps the driver or the kubelet elsewhere, no CUDA program
	// starts (Fabric Manager down).
	stuck := []string{brokenNode, k3sNode, unconfiguredNode, cosNode, kubeletRootNode, fabricDownNode}
	for i := range gpuNodes - 1 {
		healthy = append(healthy, fmt.Sprintf("gpu-node-%d", i))
	}
	// installed is an ordered container on the chart installed with the
	// README's command.
	installed := func(text string, body func()) bool {
		// Offset: each container sorts at its caller's line, in this file's
		// order, not by its text.
		return Describe("installed with the documented helm command: "+text, Ordered, Offset(1), func() {
			// The stuck nodes' owner keeps them out of driver upgrades: an
			// upgrade of a node whose driver never loads would hold a place
			// of every budget (MIG's and the repairs' too) until its
			// validation times out. The driver version the container started
			// with is put back before they leave the upgrade's reach: an
			// upgrade spec leaves them behind it, and the next container on
			// the process would find one of them upgrading, for ever.
			var version gpuv1.DriverVersion
			BeforeAll(func(ctx SpecContext) {
				ensureInstalled(ctx, documented, healthy)
				for _, n := range stuck {
					setNodeLabel(ctx, n, gpuv1.LabelUpgradeSkip, gpuv1.LabelTrue)
				}
				version = policy(Default, ctx).Spec.Driver.Version
			})
			AfterAll(func(ctx SpecContext) {
				setPolicy(ctx, func(cp *gpuv1.ClusterPolicy) { cp.Spec.Driver.Version = version })
				for _, n := range stuck {
					setNodeLabel(ctx, n, gpuv1.LabelUpgradeSkip, "")
				}
			})
			leavesTheClusterAsItFoundIt(healthy)
			body()
		})
	}

	installed("runtime settings", func() {
		It("follows k3s's containerd paths set in toolkit.env with its host mounts", func(ctx SpecContext) {
			K3sPathsSpec(ctx, K3sPathsInput{
				Config: "/var/lib/rancher/k3s/agent/etc/containerd/config.toml.tmpl", Socket: "/run/k3s/containerd/containerd.sock",
				Nodes: healthy,
			})
		})

		It("keeps the RuntimeClass with the toolkit disabled", func(ctx SpecContext) {
			ToolkitDisabledSpec(ctx, healthy)
		})

		It("renames the RuntimeClass and its handler together", func(ctx SpecContext) {
			RuntimeClassSpec(ctx, healthy)
		})

		It("runs GKE's Container-Optimized OS nodes with NVIDIA's documented host paths", func(ctx SpecContext) {
			GKECOSSpec(ctx, healthy)
		})

		It("registers the device plugin with a kubelet whose root is moved", func(ctx SpecContext) {
			KubeletRootSpec(ctx, healthy)
		})

		It("switches between CDI and the older mode with GPU pods running, losing none", func(ctx SpecContext) {
			CDISwitchSpec(ctx, healthy)
		})

		It("applies a changed value on helm upgrade", func(ctx SpecContext) {
			HelmUpgradeSpec(ctx, HelmUpgradeInput{Set: "dcgmExporter.enabled=false", Disabled: "dcgm-exporter", Nodes: healthy})
		})
	})

	installed("reboots and GPU health", func() {
		It("resets and re-forms the chains of rebooted nodes, in order", func(ctx SpecContext) {
			RebootSpec(ctx, RebootInput{Nodes: healthy[:2]})
		})

		It("keeps GPU pods off rebooted nodes with the readiness taint until their chains re-form", func(ctx SpecContext) {
			ReadinessTaintSpec(ctx, ReadinessTaintInput{Reboot: healthy[:2], Ready: healthy[2:], NeverReady: stuck})
		})

		It("records GPUs the device plugin reports unhealthy, and their return", func(ctx SpecContext) {
			UnhealthyGPUsSpec(ctx, healthy[2])
		})

		It("repairs unhealthy GPUs: a device plugin restart, a driver reload, a reboot, or a failure", func(ctx SpecContext) {
			RemediationPathsSpec(ctx, RemediationPathsInput{PluginRestart: healthy[0], DriverReload: healthy[1],
				Reboot: healthy[2], Never: healthy[3]})
		})

		It("waits for a person's approval to repair with autoStart off", func(ctx SpecContext) {
			RemediationApprovalSpec(ctx, healthy[0])
		})

		It("repairs unhealthy nodes one at a time within maxParallel, through an operator crash", func(ctx SpecContext) {
			RemediationBudgetSpec(ctx, healthy[:3])
		})

		It("upgrades the driver of a node whose repair waits for a reboot, and the reboot repairs it", func(ctx SpecContext) {
			RepairThenUpgradeSpec(ctx, RepairThenUpgradeInput{Sick: healthy[0], Others: healthy[1:],
				Versions: []string{"570.172.08", "575.57.08"}, Skip: stuck})
		})
	})

	installed("NVIDIADriver resources", func() {
		It("hands the drivers to NVIDIADrivers: none replaced on the default one, pools moved through the upgrade, a conflict held", func(ctx SpecContext) {
			NVIDIADriverSpec(ctx, NVIDIADriverInput{Gold: healthy[:2], Silver: healthy[2:3], Others: healthy[3:]})
		})

		It("runs precompiled drivers per kernel: a kernel without an image held, a new kernel moved through the upgrade", func(ctx SpecContext) {
			PrecompiledSpec(ctx, PrecompiledInput{Precompiled: healthy[:2], Others: healthy[2:]})
		})
	})

	installed("node pools", func() {
		It("runs node pools: time-slicing, MPS and MIG per pool, MIG devices applied again after a driver upgrade", func(ctx SpecContext) {
			PoolSpec(ctx, PoolInput{Shared: healthy[:2], MIG: healthy[2:4]})
		})

		It("hands over to a second ClusterPolicy without replacing any operand, and back", func(ctx SpecContext) {
			HandOverSpec(ctx, healthy)
		})
	})

	installed("GPU sharing", func() {
		It("runs a time-slicing configuration per node, restarting only the device plugin and GFD", func(ctx SpecContext) {
			TimeSlicingSpec(ctx, healthy[0], healthy[1], healthy[2])
		})

		It("changes nothing on any node when an edit breaks the configuration a node runs", func(ctx SpecContext) {
			BrokenEditSpec(ctx, healthy[1], []string{healthy[0], healthy[2]})
		})

		It("reconfigures MIG one node at a time, through failures, hangs and an operator crash", func(ctx SpecContext) {
			MIGSpec(ctx, MIGInput{Nodes: healthy[:2], FailOnce: healthy[2], HangOnce: healthy[3]})
		})
	})

	installed("operator crashes and driver upgrades", func() {
		It("resumes a rollout after the operator is killed in the middle of it", func(ctx SpecContext) {
			OperatorCrashSpec(ctx, CrashInput{Nodes: healthy})
		})

		It("has every operand pod found by the labels NVIDIA users select on", func(ctx SpecContext) {
			NVIDIASelectorsSpec(ctx, healthy)
		})

		It("acts on NVIDIA's documented custom metrics and a JSON patch of the exporter's Service", func(ctx SpecContext) {
			NVIDIAFieldsSpec(ctx, healthy)
		})

		It("runs NVIDIA's standalone DCGM host engine before the exporter on a JSON patch of dcgm.enabled", func(ctx SpecContext) {
			StandaloneDCGMSpec(ctx, healthy)
		})

		// The upgrades leave the nodes on the version they upgrade to: each
		// picks one other than the nodes run.
		It("rolls a driver upgrade within the budget, evicting and rescheduling GPU workloads", func(ctx SpecContext) {
			UpgradeSpec(ctx, UpgradeInput{Versions: []string{"575.57.08", "580.82.07"}, Nodes: healthy, Skip: stuck,
				Workloads: 6, MaxInProgress: 1})
		})

		It("resumes a driver upgrade after the operator is killed in the middle of it", func(ctx SpecContext) {
			UpgradeSpec(ctx, UpgradeInput{Versions: []string{"580.82.07", "575.57.08"}, Nodes: healthy, Skip: stuck,
				Workloads: 6, MaxInProgress: 1, KillAt: gpuv1.UpgradePodDeletion})
		})

		It("upgrades by hand as NVIDIA's documentation has it: autoUpgrade off, a driver pod deleted, its GPU pods evicted first", func(ctx SpecContext) {
			ManualUpgradeSpec(ctx, ManualUpgradeInput{Versions: []string{"575.57.08", "580.82.07"}, ByHand: healthy[0], Waiting: healthy[1:]})
		})

		It("restarts a driver pod deleted with its configuration unchanged in place: no cordon, no state leaves ready, the device plugin and GPU pods run on", func(ctx SpecContext) {
			DriverRestartInPlaceSpec(ctx, healthy[1])
		})
	})

	installed("rollout, and nodes of every kind", func() {
		It("rolls out in order", func(ctx SpecContext) {
			AllReadySpec(ctx, AllReadyInput{Nodes: healthy})
		})

		It("serves its metrics over HTTPS only to callers allowed to read them", func(ctx SpecContext) {
			MetricsAuthSpec(ctx)
		})

		It("holds nobody back for a node whose driver never loads, and reports it, in kubectl gpu too", func(ctx SpecContext) {
			// Ready: the healthy nodes, the host-driver and CRI-O nodes; not the
			// broken, k3s (wrong paths), unconfigured, GKE COS and moved
			// kubelet root nodes, under the default values.
			BrokenNodeSpec(ctx, BrokenNodeInput{Node: brokenNode, Healthy: healthy,
				ReadyNodes: fmt.Sprintf("%d/%d", len(healthy)+2, gpuNodes+7)})
		})

		It("holds a node where no CUDA program starts out of readiness, and names the cause", func(ctx SpecContext) {
			FabricManagerDownSpec(ctx)
		})

		It("uses the driver of a host that has one, and says so", func(ctx SpecContext) {
			HostDriverSpec(ctx)
		})

		It("configures CRI-O with NVIDIA's three runtimes under CDI and runs pods naming each RuntimeClass", func(ctx SpecContext) {
			CRIOSpec(ctx)
		})

		It("keeps the toolkit pending where the runtime reports no NVIDIA handler, and names the nodes", func(ctx SpecContext) {
			RuntimeProofSpec(ctx, RuntimeProofInput{Nodes: []string{unconfiguredNode, k3sNode}})
		})
	})

	Describe("installed with a driver pool in allocation mode dra", Ordered, func() {
		in := DRAInput{DRA: healthy[0], DevicePlugin: healthy[1:3]}
		BeforeAll(func(ctx SpecContext) { ensureUninstalled(ctx) })
		AfterAll(func(ctx SpecContext) { setNodeLabel(ctx, in.DRA, draPoolLabel, "") })

		It("runs the DRA driver in the device plugin's place on the DRA pool, and the scheduler allocates its GPUs", func(ctx SpecContext) {
			DRASpec(ctx, in)
		})

		It("moves the DRA pool to the device plugin and back under a PodDisruptionBudget, through an operator crash", func(ctx SpecContext) {
			DRASwitchSpec(ctx, in)
		})

		It("moves every pool to DRA under NVIDIA's GPUCluster, and back when it is deleted", func(ctx SpecContext) {
			DRAGPUClusterSpec(ctx, in)
		})

		It("leaves nothing of the DRA driver behind on helm uninstall", func(ctx SpecContext) {
			DRAUninstallSpec(ctx, in)
		})
	})

	Describe("uninstalled", Ordered, func() {
		BeforeAll(func(ctx SpecContext) { ensureInstalled(ctx, documented, healthy) })

		It("leaves nothing behind on helm uninstall", func(ctx SpecContext) {
			UninstallSpec(ctx)
		})
	})

	Describe("installed with NVIDIA's default values file", Ordered, func() {
		BeforeAll(func(ctx SpecContext) { ensureUninstalled(ctx) })

		It("installs unchanged, saying what it ignores", func(ctx SpecContext) {
			InstallSpec(InstallInput{HelmArgs: []string{"-f", nvidiaValues}, Notes: []string{
				"These values of NVIDIA's chart are accepted and ignored:", "  nodeStatusExporter: node status is in the node labels nvidia.com/gpu.state.*",
				"name NVIDIA's operator image",
			}})
			AllReadySpec(ctx, AllReadyInput{Nodes: healthy})
			for _, n := range healthy {
				Expect(podOn(ctx, n, "driver").Spec.Containers[0].Image).To(HavePrefix("nvcr.io/nvidia/driver:595.91.07-"),
					"NVIDIA's values pin their driver")
			}
			UninstallSpec(ctx)
		})
	})
})
