//go:build e2e

package e2e

import (
	"context"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/driverpool"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// PoolInput names the nodes PoolSpec puts in its two pools.
type PoolInput struct {
	// Shared is the time-sliced pool; its second node carries its own
	// label for an MPS configuration.
	Shared []string
	// MIG is the pool partitioned into MIG devices.
	MIG []string
}

// mps is a device plugin configuration file sharing each GPU between
// replicas pods through MPS, in NVIDIA's format.
func mps(replicas string) string {
	return "version: v1\nsharing:\n  mps:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: " + replicas + "\n"
}

// PoolSpec runs what a person does with node pools: label the nodes,
// then give driver.nodePools a time-sliced pool and a MIG pool. The
// nodes move to their pool's driver DaemonSet through the driver upgrade,
// one at a time; the shared pool runs ts-4 and one of its nodes its own
// mps-2 (the MPS control daemon beside it). With migManager turned on,
// the MIG pool is partitioned one node at a time, a PodDisruptionBudget
// holding the first node's eviction (and the second node) until it is
// lifted. A driver version pinned for the MIG pool then replaces its
// drivers, which destroys MIG devices: each node's configuration is
// applied again before its device plugin starts, and the upgrade ends.
// Everything goes back as it was, through the same machinery.
func PoolSpec(ctx context.Context, in PoolInput) {
	all := append(append([]string{}, in.Shared...), in.MIG...)
	AllReadySpec(ctx, AllReadyInput{Nodes: all})
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "pool-plugin-configs", Namespace: "gpu-operator"},
		Data: map[string]string{"ts-4": timeSlicing("4"), "mps-2": mps("2")}}
	if err := k8s.Create(ctx, cm); err != nil && !apierrors.IsAlreadyExists(err) {
		Expect(err).NotTo(HaveOccurred())
	}
	for _, n := range in.Shared {
		setNodeLabel(ctx, n, "gpu-pool", "shared")
	}
	for _, n := range in.MIG {
		setNodeLabel(ctx, n, "gpu-pool", "mig")
	}
	setNodeLabel(ctx, in.Shared[1], gpuv1.LabelDevicePluginConfig, "mps-2")
	// Each pool's nodes move within the pool's upgrade budget
	// (maxParallelUpgrades, 1).
	sharedMoves, migMoves := watchUpgrades(ctx, in.Shared), watchUpgrades(ctx, in.MIG)
	setPolicy(ctx, func(cp *gpuv1.ClusterPolicy) {
		cp.Spec.DevicePlugin.Config = &gpuv1.DevicePluginConfig{Name: cm.Name}
		cp.Spec.Driver.NodePools = []gpuv1.DriverNodePool{
			{Name: "shared", NodeSelector: map[string]gpuv1.LabelValue{"gpu-pool": "shared"}, DevicePluginConfig: "ts-4"},
			{Name: "mig", NodeSelector: map[string]gpuv1.LabelValue{"gpu-pool": "mig"}, MIGConfig: "all-1g.18gb"},
		}
	})
	// Into the pools: each node's driver replaced by its pool's.
	expectPools(ctx, map[string][]string{"shared": in.Shared, "mig": in.MIG})
	sharedMoves.stop()
	migMoves.stop()
	Expect(sharedMoves.peak()).To(Equal(1), "one node of a pool at a time changes pools")
	Expect(migMoves.peak()).To(Equal(1), "one node of a pool at a time changes pools")
	expectSharing(ctx, in.Shared[0], 32, "4", "time-slicing")
	expectSharing(ctx, in.Shared[1], 16, "2", "mps")
	Expect(podOn(ctx, in.Shared[1], string(state.MPSControlDaemon))).NotTo(BeNil(), "the MPS control daemon runs beside the plugin")
	Expect(podOn(ctx, in.Shared[0], string(state.MPSControlDaemon))).To(BeNil())
	GinkgoWriter.Printf("pools, sharing per pool and per node: %s\n", sharingLabels(ctx, all...))

	// The MIG pool, within maxParallel 1, a PodDisruptionBudget in the
	// way: one GPU pod on each node, so that the first node admitted has
	// one to evict.
	onePerNode(ctx, "pool", in.MIG)
	before := runningPods(ctx, "pool", len(in.MIG))
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "pinned", Namespace: "pool"},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(0)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "pinned"}}}}
	Expect(k8s.Create(ctx, pdb)).To(Succeed())
	log := watchMIG(ctx, in.MIG)
	setMIGManager(ctx, func(s *gpuv1.MIGManagerSpec) {
		s.Enabled = ptr.To(true)
		s.MaxParallel = ptr.To(intstr.FromInt32(1))
		s.ApplyTimeoutSeconds = nil // the default, whatever the specs before set
	})
	var held string
	Eventually(func(g Gomega) {
		for _, n := range in.MIG {
			if nodeLabel(g, ctx, n, gpuv1.LabelMIGReconfigureState) == string(gpuv1.MIGEviction) {
				held = n
			}
		}
		g.Expect(held).NotTo(BeEmpty())
	}).WithTimeout(2*time.Minute).Should(Succeed(), "as it went:\n%s", log)
	Consistently(func(g Gomega) {
		g.Expect(nodeLabel(g, ctx, held, gpuv1.LabelMIGReconfigureState)).To(Equal(string(gpuv1.MIGEviction)), "the PDB holds the eviction")
		g.Expect(log.peak()).To(Equal(1), "the other node waits")
	}).WithTimeout(10 * time.Second).Should(Succeed())
	Expect(k8s.Delete(ctx, pdb)).To(Succeed())
	for _, n := range in.MIG {
		Eventually(func(g Gomega) {
			g.Expect(nodeLabel(g, ctx, n, gpuv1.LabelMIGReconfigureState)).To(Equal(string(gpuv1.MIGReconfigureDone)))
		}).WithTimeout(4*time.Minute).WithPolling(time.Second).Should(Succeed(), "node %s:\n%s", n, log)
		Eventually(func() []gpuv1.MIGReconfigureState { return log.sequence(n) }).WithTimeout(caughtUp).
			Should(Equal(migSteps), "node %s (the log's watch catches up with the reads):\n%s", n, log)
		expectMIGPartitioned(ctx, n)
	}
	log.stop()
	GinkgoWriter.Printf("the MIG pool, one node at a time:\n%s\n", log)
	Expect(log.peak()).To(Equal(1), "maxParallel is 1:\n%s", log)
	Expect(log.offTaints()).To(BeEmpty())
	after := runningPods(ctx, "pool", len(in.MIG))
	for uid := range before {
		Expect(after).NotTo(HaveKey(uid), "every GPU pod on the MIG pool was evicted")
	}
	Expect(k8s.Delete(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "pinned", Namespace: "pool"}})).To(Succeed())

	// A driver pinned for the MIG pool: every driver reload destroys the
	// MIG devices, which come back before the upgrade can end.
	log = watchMIG(ctx, in.MIG)
	upgrades := watchUpgrades(ctx, in.MIG)
	setPolicy(ctx, func(cp *gpuv1.ClusterPolicy) { cp.Spec.Driver.NodePools[1].Version = "575.57.08" })
	for _, n := range in.MIG {
		Eventually(func(g Gomega) {
			got := node(g, ctx, n)
			g.Expect(got.Labels).To(HaveKeyWithValue(gpuv1.LabelDriverVersion, "575.57.08"))
			g.Expect(got.Labels).To(HaveKeyWithValue(gpuv1.LabelUpgradeState, string(gpuv1.UpgradeDone)))
			g.Expect(got.Labels).To(HaveKeyWithValue(gpuv1.LabelMIGReconfigureState, string(gpuv1.MIGReconfigureDone)))
		}).WithTimeout(6*time.Minute).WithPolling(time.Second).Should(Succeed(), "node %s:\n%s", n, log)
		Eventually(func() []gpuv1.MIGReconfigureState { return log.sequence(n) }).WithTimeout(caughtUp).
			Should(Equal([]gpuv1.MIGReconfigureState{gpuv1.MIGReconfigureDone, gpuv1.MIGReconfigureRequired,
				gpuv1.MIGClientsOff, gpuv1.MIGApply, gpuv1.MIGValidation, gpuv1.MIGReconfigureDone}),
				"node %s applies its configuration again, evicting nothing:\n%s", n, log)
		Expect(strings.Join(eventsOn(ctx, n), "\n")).To(ContainSubstring(`the MIG devices of "all-1g.18gb" are gone`))
		expectMIGPartitioned(ctx, n)
	}
	log.stop()
	upgrades.stop()
	GinkgoWriter.Printf("the MIG pool's driver upgrade, MIG devices applied again:\n%s\n", log)
	Expect(log.offTaints()).To(BeEmpty())
	Expect(upgrades.peak()).To(Equal(1))

	// Back as it was: whole GPUs, no pools, the default configuration.
	setMIGManager(ctx, func(s *gpuv1.MIGManagerSpec) { s.MaxParallel = ptr.To(intstr.FromString("100%")) })
	setPolicy(ctx, func(cp *gpuv1.ClusterPolicy) { cp.Spec.Driver.NodePools[1].MIGConfig = "all-disabled" })
	for _, n := range in.MIG {
		Eventually(func(g Gomega) {
			got := node(g, ctx, n)
			g.Expect(got.Annotations).To(HaveKeyWithValue(gpuv1.AnnotationMIGApplied, "all-disabled"))
			g.Expect(got.Labels).To(HaveKeyWithValue(gpuv1.LabelMIGReconfigureState, string(gpuv1.MIGReconfigureDone)))
			g.Expect(got.Status.Allocatable.Name("nvidia.com/gpu", "").Value()).To(BeEquivalentTo(8))
		}).WithTimeout(3*time.Minute).Should(Succeed(), "node %s", n)
	}
	setMIGManager(ctx, func(s *gpuv1.MIGManagerSpec) { s.Enabled = ptr.To(false) })
	setNodeLabel(ctx, in.Shared[1], gpuv1.LabelDevicePluginConfig, "")
	setPolicy(ctx, func(cp *gpuv1.ClusterPolicy) {
		cp.Spec.Driver.NodePools = nil
		cp.Spec.DevicePlugin.Config = nil
	})
	for _, n := range all {
		setNodeLabel(ctx, n, "gpu-pool", "")
	}
	expectPools(ctx, map[string][]string{gpuv1.DefaultDriverPool: all})
	for _, n := range all {
		Eventually(func(g Gomega) {
			got := node(g, ctx, n)
			g.Expect(got.Labels).NotTo(HaveKey(gpuv1.LabelMIGConfig))
			g.Expect(got.Labels).NotTo(HaveKey(gpuv1.LabelMIGReconfigureState))
			g.Expect(got.Labels).To(HaveKeyWithValue("nvidia.com/gpu.sharing-strategy", "none"))
			g.Expect(got.Status.Allocatable.Name("nvidia.com/gpu", "").Value()).To(BeEquivalentTo(8))
		}).WithTimeout(2*time.Minute).Should(Succeed(), "node %s", n)
	}
	Eventually(func() *corev1.Pod { return podOn(ctx, in.Shared[1], string(state.MPSControlDaemon)) }).
		WithTimeout(time.Minute).Should(BeNil(), "the MPS control daemon leaves with the configuration")
	Expect(k8s.Delete(ctx, cm)).To(Succeed())
	Expect(k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "pool"}})).To(Succeed())
}

// onePerNode runs a Deployment "pinned" of one GPU pod on each node.
func onePerNode(ctx context.Context, namespace string, nodes []string) {
	createGPUDeployment(ctx, namespace, "pinned", int32(len(nodes)), &corev1.Affinity{
		NodeAffinity: onlyOn(nodes),
		PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "pinned"}}, TopologyKey: "kubernetes.io/hostname",
		}}},
	})
}

// expectPools waits until every node is in its pool, runs the driver of
// the pool's DaemonSet and is uncordoned, then ready.
func expectPools(ctx context.Context, pools map[string][]string) {
	for pool, nodes := range pools {
		for _, n := range nodes {
			Eventually(func(g Gomega) {
				got := node(g, ctx, n)
				g.Expect(got.Labels).To(HaveKeyWithValue(gpuv1.LabelDriverPool, pool))
				g.Expect(got.Spec.Unschedulable).To(BeFalse())
				want, ok := driverpool.FromPolicy(activePolicy(g, ctx)).DaemonSetFor(got.Name, got.Labels)
				g.Expect(ok).To(BeTrue())
				p := podOn(ctx, n, string(state.Driver))
				g.Expect(p).NotTo(BeNil())
				g.Expect(metav1.GetControllerOf(p).Name).To(Equal(want))
			}).WithTimeout(5*time.Minute).WithPolling(time.Second).Should(Succeed(), "node %s, pool %q", n, pool)
		}
		AllReadySpec(ctx, AllReadyInput{Nodes: nodes})
	}
}

// expectSharing checks what a shared node advertises and GFD's labels.
func expectSharing(ctx context.Context, name string, gpus int64, replicas, strategy string) {
	Eventually(func(g Gomega) {
		n := node(g, ctx, name)
		g.Expect(n.Status.Allocatable.Name("nvidia.com/gpu", "").Value()).To(Equal(gpus))
		g.Expect(n.Labels).To(HaveKeyWithValue("nvidia.com/gpu.replicas", replicas))
		g.Expect(n.Labels).To(HaveKeyWithValue("nvidia.com/gpu.product", "NVIDIA-H200-SHARED"))
		g.Expect(n.Labels).To(HaveKeyWithValue("nvidia.com/gpu.sharing-strategy", strategy))
	}).WithTimeout(2*time.Minute).Should(Succeed(), "node %s", name)
}

// expectMIGPartitioned checks a node advertises all-1g.18gb's 56 MIG
// devices, untainted, and GFD's labels say so: GFD comes back after the
// device plugin the end of a reconfiguration waits for.
func expectMIGPartitioned(ctx context.Context, name string) {
	Eventually(func(g Gomega) {
		n := node(g, ctx, name)
		g.Expect(n.Status.Allocatable.Name("nvidia.com/gpu", "").Value()).To(BeEquivalentTo(56), "node %s", name)
		g.Expect(n.Labels).To(HaveKeyWithValue("nvidia.com/gpu.product", "NVIDIA-H200-MIG-1g.18gb"))
		g.Expect(n.Spec.Taints).NotTo(ContainElement(HaveField("Key", gpuv1.TaintMIGReconfiguring)))
	}).WithTimeout(time.Minute).Should(Succeed())
}
