package driverpool

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	gpuv1alpha1 "github.com/gpu-operator/gpu-operator/api/v1alpha1"
)

func nvidiaDriver(name string, mutate func(*gpuv1alpha1.NVIDIADriverSpec)) gpuv1alpha1.NVIDIADriver {
	d := gpuv1alpha1.NVIDIADriver{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: gpuv1alpha1.NVIDIADriverSpec{DriverType: "gpu", Repository: "nvcr.io/nvidia", Image: "driver", Version: "580.126.20"}}
	if mutate != nil {
		mutate(&d.Spec)
	}
	return d
}

func byNVIDIADrivers() *gpuv1.ClusterPolicy {
	return &gpuv1.ClusterPolicy{Spec: gpuv1.ClusterPolicySpec{Driver: gpuv1.DriverSpec{
		Version: "595.91.07", UseNvidiaDriverCRD: ptr.To(true),
		UpgradePolicy: gpuv1.DriverUpgradePolicySpec{MaxParallelUpgrades: ptr.To[int32](3)},
		// Ignored under NVIDIADrivers.
		NodePools: []gpuv1.DriverNodePool{{Name: "gold", NodeSelector: map[string]gpuv1.LabelValue{"tier": "gold"}}},
	}}}
}

func TestPolicyPoolsFirstMatchThenDefault(t *testing.T) {
	g := NewWithT(t)
	cp := &gpuv1.ClusterPolicy{Spec: gpuv1.ClusterPolicySpec{Driver: gpuv1.DriverSpec{Version: "595.91.07",
		NodePools: []gpuv1.DriverNodePool{
			{Name: "h100", NodeSelector: map[string]gpuv1.LabelValue{"gpu": "h100"}, Version: "580.126.20"},
			{Name: "a100", NodeSelector: map[string]gpuv1.LabelValue{"gpu": "a100"}},
		}}}}
	s := FromPolicy(cp)
	g.Expect(s.Assign("n", map[string]string{"gpu": "h100"})).To(Equal(Assignment{Pool: "h100", Mode: gpuv1.AllocationDevicePlugin}))
	g.Expect(s.Assign("n", map[string]string{"gpu": "a100"})).To(Equal(Assignment{Pool: "a100", Mode: gpuv1.AllocationDevicePlugin}))
	g.Expect(s.Assign("n", map[string]string{"gpu": "t4"})).To(Equal(Assignment{Pool: gpuv1.DefaultDriverPool, Mode: gpuv1.AllocationDevicePlugin}))
	g.Expect(s.Pool("h100").Driver.Version).To(BeEquivalentTo("580.126.20"))
	g.Expect(s.Pool("a100").Driver.Version).To(BeEquivalentTo("595.91.07"), "a pool without a pin runs driver.version")
	g.Expect(s.Pool("h100").Driver.NodePools).To(BeEmpty())
}

func TestNVIDIADriversSelectTheirNodes(t *testing.T) {
	g := NewWithT(t)
	s := Resolve(byNVIDIADrivers(), []gpuv1alpha1.NVIDIADriver{
		nvidiaDriver("demo-gold", func(s *gpuv1alpha1.NVIDIADriverSpec) { s.NodeSelector = gpuv1.Labels{"driver.config": "gold"} }),
		nvidiaDriver("demo-silver", func(s *gpuv1alpha1.NVIDIADriverSpec) {
			s.NodeSelector = gpuv1.Labels{"driver.config": "silver"}
			s.NodeAffinity = &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
					{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a", "b"}}}}}}}
		}),
		nvidiaDriver("fallback", func(s *gpuv1alpha1.NVIDIADriverSpec) { s.Default = true }),
	})
	g.Expect(s.FromNVIDIADrivers).To(BeTrue())
	g.Expect(s.Pool("gold")).To(BeNil(), "driver.nodePools are ignored under NVIDIADrivers")
	g.Expect(s.Assign("n", map[string]string{"driver.config": "gold"})).To(Equal(Assignment{Pool: "demo-gold", Mode: gpuv1.AllocationDevicePlugin}))
	g.Expect(s.Assign("n", map[string]string{"driver.config": "silver", "zone": "a"})).To(Equal(Assignment{Pool: "demo-silver", Mode: gpuv1.AllocationDevicePlugin}))
	g.Expect(s.Assign("n", map[string]string{"driver.config": "silver", "zone": "c"})).To(Equal(Assignment{Pool: "fallback", Mode: gpuv1.AllocationDevicePlugin}),
		"nodeAffinity narrows nodeSelector's selection")
	g.Expect(s.Assign("n", map[string]string{})).To(Equal(Assignment{Pool: "fallback", Mode: gpuv1.AllocationDevicePlugin}))
}

func TestConflictsAndUnclaimedNodesKeepTheirPool(t *testing.T) {
	g := NewWithT(t)
	all := nvidiaDriver("all", nil) // nodeSelector {}: every GPU node
	gold := nvidiaDriver("gold", func(s *gpuv1alpha1.NVIDIADriverSpec) { s.NodeSelector = gpuv1.Labels{"tier": "gold"} })
	s := Resolve(byNVIDIADrivers(), []gpuv1alpha1.NVIDIADriver{gold, all})
	onGold := map[string]string{"tier": "gold", gpuv1.LabelDriverPool: "gold"}
	a := s.Assign("n", onGold)
	g.Expect(a).To(Equal(Assignment{Pool: "gold", Conflicts: []string{"all", "gold"}}))
	g.Expect(a.Held()).To(BeTrue())
	g.Expect(s.Assign("n", map[string]string{"tier": "silver"})).To(Equal(Assignment{Pool: "all", Mode: gpuv1.AllocationDevicePlugin}))

	two := Resolve(byNVIDIADrivers(), []gpuv1alpha1.NVIDIADriver{
		nvidiaDriver("a", func(s *gpuv1alpha1.NVIDIADriverSpec) { s.Default = true }),
		nvidiaDriver("b", func(s *gpuv1alpha1.NVIDIADriverSpec) { s.Default = true }),
	})
	g.Expect(two.Assign("n", map[string]string{gpuv1.LabelDriverPool: "a"})).To(Equal(Assignment{Pool: "a", Conflicts: []string{"a", "b"}}),
		"two defaults conflict on every node they would take")

	none := Resolve(byNVIDIADrivers(), []gpuv1alpha1.NVIDIADriver{gold})
	u := none.Assign("n", map[string]string{gpuv1.LabelDriverPool: "default"})
	g.Expect(u).To(Equal(Assignment{Pool: "default", Unclaimed: true}), "a node no NVIDIADriver selects keeps its driver")
	g.Expect(u.Held()).To(BeTrue())
	_, ok := none.DaemonSetFor("n", map[string]string{})
	g.Expect(ok).To(BeFalse())
}

func TestDeletedAndVGPUDriversRunNothing(t *testing.T) {
	g := NewWithT(t)
	deleting := nvidiaDriver("old", nil)
	deleting.DeletionTimestamp = &metav1.Time{}
	vgpu := nvidiaDriver("vgpu", func(s *gpuv1alpha1.NVIDIADriverSpec) {
		s.DriverType = gpuv1alpha1.DriverTypeVGPU
		s.NodeSelector = gpuv1.Labels{"vgpu": "true"}
	})
	s := Resolve(byNVIDIADrivers(), []gpuv1alpha1.NVIDIADriver{deleting, vgpu})
	g.Expect(s.Pool("old")).To(BeNil())
	g.Expect(s.Assign("n", map[string]string{"vgpu": "true"})).To(Equal(Assignment{Pool: "vgpu", NotRun: true, Mode: gpuv1.AllocationDevicePlugin}))
	_, ok := s.DaemonSetFor("n", map[string]string{"vgpu": "true"})
	g.Expect(ok).To(BeFalse(), "a vGPU pool renders no DaemonSet")
	node := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"vgpu": "true",
		"feature.node.kubernetes.io/system-os_release.ID": "ubuntu", "feature.node.kubernetes.io/system-os_release.VERSION_ID": "22.04"}}}
	g.Expect(s.Groups([]corev1.Node{node})).To(BeEmpty())
}

func TestNVIDIADriverSettings(t *testing.T) {
	g := NewWithT(t)
	cp := byNVIDIADrivers()
	cp.Spec.Daemonsets.Tolerations = []gpuv1.Toleration{{Key: "gpu", Operator: "Exists"}}
	cp.Spec.Daemonsets.Labels = gpuv1.Labels{"team": "infra"}
	cp.Spec.Daemonsets.PriorityClassName = "system-node-critical"
	s := Resolve(cp, []gpuv1alpha1.NVIDIADriver{
		nvidiaDriver("plain", func(s *gpuv1alpha1.NVIDIADriverSpec) { s.Version = "" }),
		nvidiaDriver("own", func(s *gpuv1alpha1.NVIDIADriverSpec) {
			s.Default = true
			s.UpgradePolicy = &gpuv1.DriverUpgradePolicySpec{MaxUnavailable: ptr.To(intstr.FromInt32(2))}
			s.Tolerations = []gpuv1.Toleration{{Key: "own", Operator: "Exists"}}
			s.Labels = gpuv1.Labels{"pool": "own"}
			s.PriorityClassName = "high"
			s.KernelModuleConfig = &gpuv1alpha1.ConfigMapRef{Name: "gb200-params"}
			s.GPUDirectRDMA = &gpuv1.GPUDirectRDMASpec{Enabled: ptr.To(true)}
			s.RepoConfig = &gpuv1alpha1.ConfigMapRef{Name: ""}
			s.HostNetwork = ptr.To(true)
			s.PodSecurityContext = &corev1.PodSecurityContext{SupplementalGroups: []int64{7}}
			s.StartupProbe = &gpuv1.ContainerProbeSpec{FailureThreshold: 240}
			s.LivenessProbe = &gpuv1.ContainerProbeSpec{PeriodSeconds: 30}
			s.ReadinessProbe = &gpuv1.ContainerProbeSpec{PeriodSeconds: 20}
			s.SecretEnv = "proxy"
			s.Manager = &gpuv1.DriverManagerSpec{Env: []gpuv1.EnvVar{{Name: gpuv1.ManagerEnvAutoDrain, Value: "true"}}}
		}),
	})
	plain, own := s.Pool("plain"), s.Pool("own")
	g.Expect(plain.Driver.Version).To(BeEquivalentTo("595.91.07"), "no version: the policy's driver.version")
	g.Expect(plain.Driver.UpgradePolicy.MaxParallelUpgrades).To(Equal(ptr.To[int32](3)), "no upgradePolicy: the policy's")
	g.Expect(plain.OwnUpgradePolicy).To(BeFalse())
	g.Expect(plain.Daemonsets.Tolerations).To(Equal(cp.Spec.Daemonsets.Tolerations))
	g.Expect(own.OwnUpgradePolicy).To(BeTrue())
	g.Expect(own.Driver.UpgradePolicy.MaxParallelUpgrades).To(BeNil())
	g.Expect(own.Daemonsets.Tolerations).To(Equal([]gpuv1.Toleration{{Key: "own", Operator: "Exists"}}))
	g.Expect(own.Daemonsets.Labels).To(Equal(gpuv1.Labels{"team": "infra", "pool": "own"}))
	g.Expect(cp.Spec.Daemonsets.Labels).To(Equal(gpuv1.Labels{"team": "infra"}), "the policy is not written to")
	g.Expect(own.Daemonsets.PriorityClassName).To(BeEquivalentTo("high"))
	g.Expect(own.Driver.KernelModuleConfig).To(Equal(&gpuv1.DriverKernelModuleConfig{Name: "gb200-params"}))
	g.Expect(own.Driver.RepoConfig).To(BeNil(), "an empty name means none")
	g.Expect(own.Driver.RDMA.IsEnabled()).To(BeTrue())
	g.Expect(plain.Driver.RDMA.IsEnabled()).To(BeFalse())
	// NVIDIA's NVIDIADriver fields of the driver pod (gpu-operator v26.7.0
	// manifests/state-driver/0500_daemonset.yaml, internal/state/driver.go).
	g.Expect(own.Driver.UsesHostNetwork()).To(BeTrue())
	g.Expect(plain.Driver.UsesHostNetwork()).To(BeFalse())
	g.Expect(own.Daemonsets.PodSecurityContext).To(Equal(&corev1.PodSecurityContext{SupplementalGroups: []int64{7}}))
	g.Expect(own.Driver.StartupProbe).To(Equal(&gpuv1.ContainerProbeSpec{FailureThreshold: 240}))
	g.Expect(own.Driver.LivenessProbe).To(Equal(&gpuv1.ContainerProbeSpec{PeriodSeconds: 30}))
	g.Expect(own.Driver.ReadinessProbe).To(Equal(&gpuv1.ContainerProbeSpec{PeriodSeconds: 20}))
	g.Expect(own.Driver.SecretEnv).To(Equal("proxy"))
	g.Expect(plain.Driver.SecretEnv).To(BeEmpty())
	// Its driver manager settings, for a driver pod replaced by hand.
	g.Expect(own.Driver.Manager.Env).To(Equal([]gpuv1.EnvVar{{Name: gpuv1.ManagerEnvAutoDrain, Value: "true"}}))
	g.Expect(plain.Driver.Manager).To(BeNil(), "NVIDIA's defaults, not the policy's: an NVIDIADriver has its own")
}

func TestGroupsOfLeavesOutTheNodesItIsToldTo(t *testing.T) {
	g := NewWithT(t)
	s := FromPolicy(&gpuv1.ClusterPolicy{Spec: gpuv1.ClusterPolicySpec{Driver: gpuv1.DriverSpec{Version: "595.91.07"}}})
	on := func(name, id, version string) corev1.Node {
		return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			"feature.node.kubernetes.io/system-os_release.ID": id, "feature.node.kubernetes.io/system-os_release.VERSION_ID": version}}}
	}
	nodes := []corev1.Node{on("gpu", "ubuntu", "22.04"), on("cpu", "rhel", "9.4")}
	listed := []*corev1.Node{&nodes[0], &nodes[1]}
	gpu := func(n *corev1.Node) bool { return n.Name == "gpu" }
	g.Expect(s.GroupsOf(listed, gpu)).To(HaveExactElements(HaveField("OSReleases", HaveExactElements(HaveField("ID", "ubuntu")))),
		"the node left out brings no operating system of its own")
	g.Expect(s.GroupsOf(listed, nil)).To(Equal(s.Groups(nodes)), "nil keeps every node, as Groups")
	g.Expect(s.Groups(nodes)[0].OSReleases).To(HaveLen(2))
}
