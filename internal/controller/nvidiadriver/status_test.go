package nvidiadriver

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	gpuv1alpha1 "github.com/gpu-operator/gpu-operator/api/v1alpha1"
	"github.com/gpu-operator/gpu-operator/internal/driverpool"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

func managing() *gpuv1.ClusterPolicy {
	return &gpuv1.ClusterPolicy{ObjectMeta: metav1.ObjectMeta{Name: "cluster-policy"},
		Spec: gpuv1.ClusterPolicySpec{Driver: gpuv1.DriverSpec{UseNvidiaDriverCRD: ptr.To(true), Version: "595.91.07"}}}
}

func gpuNode(name, driverState string, labels map[string]string) corev1.Node {
	l := map[string]string{gpuv1.LabelGPUPresent: "true", "feature.node.kubernetes.io/pci-10de.present": "true",
		gpuv1.StateLabel(string(state.Driver)): driverState}
	for k, v := range labels {
		l[k] = v
	}
	return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}
}

func nvd(name string, selector gpuv1.Labels, isDefault bool) gpuv1alpha1.NVIDIADriver {
	return gpuv1alpha1.NVIDIADriver{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 2},
		Spec: gpuv1alpha1.NVIDIADriverSpec{DriverType: "gpu", NodeSelector: selector, Default: isDefault}}
}

func status(d gpuv1alpha1.NVIDIADriver, cp *gpuv1.ClusterPolicy, all []gpuv1alpha1.NVIDIADriver, nodes []corev1.Node) gpuv1alpha1.NVIDIADriverStatus {
	var pools *driverpool.Set
	if cp != nil {
		pools = driverpool.Resolve(cp, all)
	}
	return buildStatus(&d, cp, pools, nodes, "gpu-operator", "")
}

func TestStatusCountsThePoolsNodes(t *testing.T) {
	g := NewWithT(t)
	gold, fallback := nvd("gold", gpuv1.Labels{"tier": "gold"}, false), nvd("fallback", nil, true)
	all := []gpuv1alpha1.NVIDIADriver{gold, fallback}
	nodes := []corev1.Node{
		gpuNode("g1", "ready", map[string]string{"tier": "gold", gpuv1.LabelDriverPool: "gold", gpuv1.LabelUpgradeState: "upgrade-done"}),
		gpuNode("g2", "pending", map[string]string{"tier": "gold", gpuv1.LabelDriverPool: "gold"}),
		gpuNode("h1", "disabled", map[string]string{"tier": "gold"}), // on its host's driver
		// Still on the fallback's driver: moving, not ready in gold.
		gpuNode("g3", "ready", map[string]string{"tier": "gold", gpuv1.LabelDriverPool: "fallback", gpuv1.LabelUpgradeState: "upgrade-required"}),
		gpuNode("s1", "ready", map[string]string{gpuv1.LabelDriverPool: "fallback"}),
		{ObjectMeta: metav1.ObjectMeta{Name: "cpu", Labels: map[string]string{"tier": "gold"}}},
	}
	st := status(gold, managing(), all, nodes)
	g.Expect(st.State).To(Equal(gpuv1alpha1.StateNotReady))
	g.Expect(st.Nodes).To(BeEquivalentTo(4))
	g.Expect(st.ReadyNodes).To(Equal("2/4"))
	g.Expect(st.ObservedGeneration).To(BeEquivalentTo(2))
	ready := meta.FindStatusCondition(st.Conditions, gpuv1alpha1.ConditionReady)
	g.Expect(ready.Reason).To(Equal(gpuv1alpha1.ReasonNodesNotReady))
	g.Expect(ready.Message).To(ContainSubstring("not ready on 2 of 4 nodes: g2, g3"))
	g.Expect(meta.IsStatusConditionFalse(st.Conditions, gpuv1alpha1.ConditionError)).To(BeTrue())

	st = status(fallback, managing(), all, nodes)
	g.Expect(st.State).To(Equal(gpuv1alpha1.StateReady))
	g.Expect(st.ReadyNodes).To(Equal("1/1"))
	g.Expect(meta.IsStatusConditionTrue(st.Conditions, gpuv1alpha1.ConditionReady)).To(BeTrue())
}

func TestStatusNamesConflicts(t *testing.T) {
	g := NewWithT(t)
	gold, every := nvd("gold", gpuv1.Labels{"tier": "gold"}, false), nvd("every", nil, false)
	var nodes []corev1.Node
	for i := range 12 {
		nodes = append(nodes, gpuNode(fmt.Sprintf("g%02d", i), "ready", map[string]string{"tier": "gold", gpuv1.LabelDriverPool: "gold"}))
	}
	nodes = append(nodes, gpuNode("s1", "ready", map[string]string{gpuv1.LabelDriverPool: "every"}))
	all := []gpuv1alpha1.NVIDIADriver{gold, every}
	st := status(gold, managing(), all, nodes)
	g.Expect(st.State).To(Equal(gpuv1alpha1.StateNotReady))
	g.Expect(st.Conflicts).To(HaveLen(gpuv1alpha1.MaxConflicts), "bounded")
	g.Expect(st.Conflicts[0]).To(Equal(gpuv1alpha1.NodeConflict{Node: "g00", With: []string{"every"}}))
	g.Expect(st.Nodes).To(BeZero(), "a node in conflict belongs to no pool")
	errCond := meta.FindStatusCondition(st.Conditions, gpuv1alpha1.ConditionError)
	g.Expect(errCond.Status).To(Equal(metav1.ConditionTrue))
	g.Expect(errCond.Reason).To(Equal(gpuv1alpha1.ReasonConflictingNodeSelector))
	g.Expect(errCond.Message).To(ContainSubstring("also selects 12 of the GPU nodes"))
	g.Expect(errCond.Message).To(ContainSubstring("g00 with every"))
	// NVIDIA's words, which its users' scripts look for.
	g.Expect(errCond.Message).To(HavePrefix("multiple NVIDIADrivers match the same node g00: [every gold]"))

	st = status(every, managing(), all, nodes)
	g.Expect(st.Conflicts[0].With).To(Equal([]string{"gold"}), "both name the other")
	g.Expect(st.ReadyNodes).To(Equal("1/1"))

	a, b := nvd("a", nil, true), nvd("b", nil, true)
	st = status(a, managing(), []gpuv1alpha1.NVIDIADriver{a, b}, nodes[:1])
	g.Expect(meta.FindStatusCondition(st.Conditions, gpuv1alpha1.ConditionError).Reason).To(Equal(gpuv1alpha1.ReasonMultipleDefaults))
	g.Expect(meta.FindStatusCondition(st.Conditions, gpuv1alpha1.ConditionError).Message).To(HavePrefix("multiple default NVIDIADrivers found: [a b]"))
}

func TestStatusWhenNotManaged(t *testing.T) {
	g := NewWithT(t)
	d := nvd("gold", nil, false)
	for name, cp := range map[string]*gpuv1.ClusterPolicy{
		"no policy":           nil,
		"not handed over":     {ObjectMeta: metav1.ObjectMeta{Name: "p"}},
		"the driver disabled": {ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: gpuv1.ClusterPolicySpec{Driver: gpuv1.DriverSpec{ComponentSpec: gpuv1.ComponentSpec{Enabled: ptr.To(false)}, UseNvidiaDriverCRD: ptr.To(true)}}},
	} {
		st := status(d, cp, []gpuv1alpha1.NVIDIADriver{d}, nil)
		g.Expect(st.State).To(Equal(gpuv1alpha1.StateDisabled), name)
		g.Expect(meta.FindStatusCondition(st.Conditions, gpuv1alpha1.ConditionReady).Reason).To(Equal(gpuv1alpha1.ReasonNotManaged), name)
	}
	vgpu := nvd("vgpu", nil, false)
	vgpu.Spec.DriverType = gpuv1alpha1.DriverTypeVGPU
	st := status(vgpu, managing(), []gpuv1alpha1.NVIDIADriver{vgpu}, []corev1.Node{gpuNode("n", "pending", nil)})
	g.Expect(st.State).To(Equal(gpuv1alpha1.StateNotReady))
	g.Expect(meta.FindStatusCondition(st.Conditions, gpuv1alpha1.ConditionError).Message).To(ContainSubstring("driverType vgpu is not run"))
}

// A kernelModuleConfig ConfigMap that does not exist holds the pool, and
// the status names it.
func TestStatusNamesAMissingModuleConfig(t *testing.T) {
	g := NewWithT(t)
	d := nvd("gb200", nil, true)
	st := buildStatus(&d, managing(), driverpool.Resolve(managing(), []gpuv1alpha1.NVIDIADriver{d}),
		[]corev1.Node{gpuNode("n", "ready", map[string]string{gpuv1.LabelDriverPool: "gb200"})}, "gpu-operator", "gb200-params")
	g.Expect(st.State).To(Equal(gpuv1alpha1.StateNotReady))
	e := meta.FindStatusCondition(st.Conditions, gpuv1alpha1.ConditionError)
	g.Expect(e.Reason).To(Equal(gpuv1alpha1.ReasonKernelModuleConfigMissing))
	g.Expect(e.Message).To(ContainSubstring("ConfigMap gb200-params, which does not exist in namespace gpu-operator"))
}
