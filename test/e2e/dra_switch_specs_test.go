//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/draslices"
)

// DRASwitchSpec moves the DRA pool of DRASpec to the device plugin and
// back, with a GPU workload on its node under a PodDisruptionBudget that
// allows no disruption: the node waits in its switch's eviction, tainted,
// its DRA driver serving, through an operator killed and restarted, until
// the budget is lifted; then the DRA driver and its slices leave before
// the device plugin starts. Back in mode dra, the workload's new pod (the
// held one was evicted) gets its claim's GPU from the node again.
func DRASwitchSpec(ctx context.Context, in DRAInput) {
	ns := "dra-switch"
	Expect(client.IgnoreAlreadyExists(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
	DeferCleanup(func(ctx SpecContext) {
		Expect(client.IgnoreNotFound(k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
	})
	template := &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: "one-gpu", Namespace: ns},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.nvidia.com"}}}}}}}
	Expect(k8s.Create(ctx, template)).To(Succeed())
	labels := map[string]string{"app": "trainer"}
	trainer := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "trainer", Namespace: ns}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To(int32(1)), Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: &template.Name}},
			// The GPU nodes' own taint, as a cloud's; not the switch's.
			Tolerations: []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}},
			Containers:  []corev1.Container{withClaim(corev1.Container{Name: "work", Image: "registry.k8s.io/pause:3.10"}, "gpu")},
		}}}}
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "trainer", Namespace: ns}, Spec: policyv1.PodDisruptionBudgetSpec{
		MaxUnavailable: ptr.To(intstr.FromInt32(0)), Selector: &metav1.LabelSelector{MatchLabels: labels}}}
	Expect(k8s.Create(ctx, pdb)).To(Succeed())
	Expect(k8s.Create(ctx, trainer)).To(Succeed())
	first := trainerPod(ctx, ns, in.DRA, "")

	tl := watchSwitch(ctx, in.DRA)
	defer func() { AddReportEntry("allocation mode switch timeline", tl.String()) }()
	defer tl.stop()
	setMode := func(mode gpuv1.AllocationMode) {
		tl.mark("the pool's allocationMode: " + string(mode))
		setPolicy(ctx, func(cp *gpuv1.ClusterPolicy) { cp.Spec.Driver.NodePools[0].AllocationMode = mode })
	}

	By("to the device plugin: the budget holds the node in its eviction")
	setMode(gpuv1.AllocationDevicePlugin)
	Eventually(func(g Gomega) {
		n := node(g, ctx, in.DRA)
		g.Expect(n.Labels).To(HaveKeyWithValue(gpuv1.LabelModeSwitchState, string(gpuv1.ModeSwitchEviction)))
		g.Expect(n.Spec.Taints).To(ContainElement(HaveField("Key", gpuv1.TaintModeSwitching)))
	}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
	Consistently(func(g Gomega) {
		n := node(g, ctx, in.DRA)
		g.Expect(n.Labels).To(HaveKeyWithValue(gpuv1.LabelModeSwitchState, string(gpuv1.ModeSwitchEviction)))
		g.Expect(n.Labels).To(HaveKeyWithValue(gpuv1.LabelAllocationMode, "dra"))
		g.Expect(n.Labels).To(HaveKeyWithValue(gpuv1.StateLabel("dra-driver"), "ready"), "the DRA driver serves the held pod")
	}).WithContext(ctx).WithTimeout(5 * time.Second).WithPolling(time.Second).Should(Succeed())
	// The operator is killed in the middle of the switch, and its
	// successor finds the node where it was.
	tl.mark("operator killed")
	op.kill()
	op = startOperator()
	Consistently(func(g Gomega) {
		g.Expect(node(g, ctx, in.DRA).Labels).To(HaveKeyWithValue(gpuv1.LabelModeSwitchState, string(gpuv1.ModeSwitchEviction)))
	}).WithContext(ctx).WithTimeout(10 * time.Second).WithPolling(time.Second).Should(Succeed())
	tl.mark("PodDisruptionBudget deleted")
	Expect(k8s.Delete(ctx, pdb)).To(Succeed())
	expectSwitched(ctx, in.DRA, gpuv1.AllocationDevicePlugin)
	Expect(podOn(ctx, in.DRA, "dra-driver")).To(BeNil())
	Eventually(func(g Gomega) {
		slices := &resourcev1.ResourceSliceList{}
		g.Expect(k8s.List(ctx, slices, client.MatchingFields{"spec.nodeName": in.DRA})).To(Succeed())
		g.Expect(slices.Items).To(BeEmpty(), "the DRA driver's slices are gone")
	}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())

	By("back to dra: the workload's new pod gets its GPU from the node")
	setMode(gpuv1.AllocationDRA)
	expectSwitched(ctx, in.DRA, gpuv1.AllocationDRA)
	trainerPod(ctx, ns, in.DRA, first.UID)
	Expect(k8s.Delete(ctx, trainer)).To(Succeed())
	Expect(tl.breaches()).To(BeEmpty(), "never from one plugin's mode to the other's")
}

// trainerPod waits for the trainer's pod other than not, bound to node
// with its claim allocated from the node's slices.
func trainerPod(ctx context.Context, ns, node string, not types.UID) *corev1.Pod {
	var out *corev1.Pod
	Eventually(func(g Gomega) {
		pods := &corev1.PodList{}
		g.Expect(k8s.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"app": "trainer"})).To(Succeed())
		var live []corev1.Pod
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && p.UID != not {
				live = append(live, p)
			}
		}
		g.Expect(live).To(HaveLen(1))
		g.Expect(live[0].Spec.NodeName).To(Equal(node))
		claims := &resourcev1.ResourceClaimList{}
		g.Expect(k8s.List(ctx, claims, client.InNamespace(ns))).To(Succeed())
		g.Expect(claims.Items).To(ContainElement(And(
			HaveField("OwnerReferences", ContainElement(HaveField("UID", live[0].UID))),
			HaveField("Status.Allocation.Devices.Results", ConsistOf(And(HaveField("Driver", draslices.GPUDriver), HaveField("Pool", node)))))))
		out = &live[0]
	}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
	return out
}

// expectSwitched waits for the node's switch to end in mode, the plugin
// of the mode serving, the other's gone, and the taint off.
func expectSwitched(ctx context.Context, name string, mode gpuv1.AllocationMode) {
	plugin, off := "device-plugin", "dra-driver"
	if mode == gpuv1.AllocationDRA {
		plugin, off = off, plugin
	}
	Eventually(func(g Gomega) {
		n := node(g, ctx, name)
		g.Expect(n.Labels).To(HaveKeyWithValue(gpuv1.LabelModeSwitchState, string(gpuv1.ModeSwitchDone)))
		g.Expect(n.Labels).To(HaveKeyWithValue(gpuv1.LabelAllocationMode, string(mode)))
		g.Expect(n.Labels).To(HaveKeyWithValue(gpuv1.StateLabel(plugin), "ready"))
		g.Expect(n.Labels).To(HaveKeyWithValue(gpuv1.StateLabel(off), "disabled"))
		g.Expect(n.Spec.Taints).NotTo(ContainElement(HaveField("Key", gpuv1.TaintModeSwitching)))
		g.Expect(podOn(ctx, name, off)).To(BeNil())
	}).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
}

// switchTimeline records each change of a node's switch state, mode
// label, plugins' states and taint, with the time since it started, and
// every version whose mode went from one plugin's straight to the other's.
type switchTimeline struct {
	mu      sync.Mutex
	start   time.Time
	current map[string]string   // by node
	mode    map[string]string   // by node
	trail   map[string][]string // by node: each mode it took, in order
	lines   []string
	breach  []string
	cancel  context.CancelFunc
}

func watchSwitch(ctx context.Context, names ...string) *switchTimeline {
	ctx, cancel := context.WithCancel(ctx)
	tl := &switchTimeline{start: time.Now(), cancel: cancel, current: map[string]string{}, mode: map[string]string{},
		trail: map[string][]string{}}
	watchNodes(ctx, names, tl.observe)
	return tl
}

func (tl *switchTimeline) observe(n *corev1.Node) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	mode, last := n.Labels[gpuv1.LabelAllocationMode], tl.mode[n.Name]
	if last != "" && last != mode && last != string(gpuv1.AllocationNone) && mode != string(gpuv1.AllocationNone) {
		tl.breach = append(tl.breach, fmt.Sprintf("%s: %s to %s at rv %s", n.Name, last, mode, n.ResourceVersion))
	}
	if mode != last {
		tl.trail[n.Name] = append(tl.trail[n.Name], mode)
	}
	tl.mode[n.Name] = mode
	sw := n.Labels[gpuv1.LabelModeSwitchState]
	if sw == "" {
		sw = "-"
	}
	key := fmt.Sprintf("switch=%-21s mode=%-13s device-plugin=%-8s dra-driver=%-8s tainted=%t", sw, mode,
		n.Labels[gpuv1.StateLabel("device-plugin")], n.Labels[gpuv1.StateLabel("dra-driver")],
		slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == gpuv1.TaintModeSwitching }))
	if key == tl.current[n.Name] {
		return
	}
	tl.current[n.Name] = key
	tl.lines = append(tl.lines, fmt.Sprintf("%6.1fs %s %s", time.Since(tl.start).Seconds(), n.Name, key))
}

func (tl *switchTimeline) mark(what string) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.lines = append(tl.lines, fmt.Sprintf("%6.1fs -- %s", time.Since(tl.start).Seconds(), what))
}

func (tl *switchTimeline) breaches() []string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return slices.Clone(tl.breach)
}

// modes are the modes a node took, in order, each once per stay.
func (tl *switchTimeline) modes(node string) []string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return slices.Clone(tl.trail[node])
}

func (tl *switchTimeline) stop() { tl.cancel() }

func (tl *switchTimeline) String() string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return strings.Join(tl.lines, "\n")
}
