//go:build e2e

package e2e

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/draslices"
	"github.com/gpu-operator/gpu-operator/internal/gating"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state/cudaworkload"
)

// DRAInput names the nodes of DRASpec: one joins a driver pool in
// allocation mode dra, the others stay in the device plugin's.
type DRAInput struct {
	DRA          string
	DevicePlugin []string
}

// draPoolLabel puts a node in the DRA pool DRASpec installs.
const draPoolLabel = "gpu-rack"

// DRASpec installs the chart with a driver pool in allocation mode dra
// beside the default pool, on nodes that never served: the DRA node runs
// NVIDIA's DRA driver in the device plugin's place, and is ready once the
// slices its simulated plugin publishes name its GPUs; the others run the
// device plugin as ever. The real scheduler allocates a ResourceClaim's
// GPU from the DRA node's slices, and puts a pod asking for nvidia.com/gpu
// on a device-plugin node. It leaves the chart installed, the DRA node's
// label in place for the specs after it.
func DRASpec(ctx context.Context, in DRAInput) {
	// A node moves to its pool's mode at once only with nothing to lose:
	// no GPU registered by a device plugin (an earlier spec's, gone with
	// the uninstall).
	Eventually(func(g Gomega) {
		for name, q := range gating.GPUResources(node(g, ctx, in.DRA).Status.Capacity) {
			g.Expect(q).To(BeZero(), "%s registered on %s", name, in.DRA)
		}
	}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
	setNodeLabel(ctx, in.DRA, draPoolLabel, "nvl72")
	InstallSpec(InstallInput{HelmArgs: append(append([]string{}, documented...),
		"--set", "driver.nodePools[0].name=nvl72", "--set", "driver.nodePools[0].nodeSelector."+draPoolLabel+"=nvl72",
		"--set", "driver.nodePools[0].allocationMode=dra")})

	Eventually(func(g Gomega) {
		labels := node(g, ctx, in.DRA).Labels
		g.Expect(labels).To(HaveKeyWithValue(gpuv1.LabelAllocationMode, "dra"))
		for s, v := range map[string]string{"driver": "ready", "container-toolkit": "ready", "device-plugin": "disabled",
			"dra-driver": "ready", "dcgm-exporter": "ready", "gpu-feature-discovery": "ready", "cuda-workload": "ready"} {
			g.Expect(labels).To(HaveKeyWithValue(gpuv1.StateLabel(s), v), "%s on %s", s, in.DRA)
		}
		for _, n := range in.DevicePlugin {
			labels := node(g, ctx, n).Labels
			g.Expect(labels).To(HaveKeyWithValue(gpuv1.LabelAllocationMode, "device-plugin"))
			g.Expect(labels).To(HaveKeyWithValue(gpuv1.StateLabel("device-plugin"), "ready"), n)
			g.Expect(labels).To(HaveKeyWithValue(gpuv1.StateLabel("dra-driver"), "disabled"), n)
		}
	}).WithContext(ctx).WithTimeout(4 * time.Minute).WithPolling(time.Second).Should(Succeed())
	Expect(podOn(ctx, in.DRA, "device-plugin")).To(BeNil(), "never both plugins on one node")

	By("the DRA node's workload proof claimed its GPU through the scheduler")
	proof := podOn(ctx, in.DRA, "cuda-workload")
	Expect(proof).NotTo(BeNil())
	Expect(proof.Spec.ResourceClaims).To(ConsistOf(HaveField("ResourceClaimTemplateName",
		HaveValue(Equal(cudaworkload.ClaimTemplateName(cudaworkload.GPUDeviceClass))))))
	Expect(proof.Status.ResourceClaimStatuses).To(HaveLen(1), "the kube-controller-manager made its claim from the template")
	Expect(proof.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms).To(
		ConsistOf(HaveField("MatchFields", ConsistOf(HaveField("Values", ConsistOf(in.DRA))))),
		"made unbound, pinned to its node: the scheduler bound it there and allocated its claim")
	Expect(proof.Status.Phase).To(Equal(corev1.PodSucceeded))
	Expect(proof.Spec.Priority).To(HaveValue(BeZero()))
	Expect(proof.Spec.PreemptionPolicy).To(HaveValue(Equal(corev1.PreemptNever)), "its PriorityClass never preempts")
	for _, n := range in.DevicePlugin {
		Expect(podOn(ctx, n, "dra-driver")).To(BeNil(), n)
	}
	// No GPU advertised: a node whose device plugin ran before (an earlier
	// spec) keeps the resource at 0, as the kubelet does.
	for name, q := range gating.GPUResources(node(Default, ctx, in.DRA).Status.Allocatable) {
		Expect(q).To(BeZero(), "%s on the DRA node", name)
	}

	By("a claim's GPU allocated from the DRA node's slices, a plugin GPU on another node")
	ns := "dra-workloads"
	Expect(client.IgnoreAlreadyExists(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
	DeferCleanup(func(ctx SpecContext) {
		Expect(client.IgnoreNotFound(k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
	})
	template := &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: "one-gpu", Namespace: ns},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.nvidia.com"}}}}}}}
	Expect(k8s.Create(ctx, template)).To(Succeed())
	pause := corev1.Container{Name: "work", Image: "registry.k8s.io/pause:3.10"}
	claimed := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "claims-a-gpu", Namespace: ns}, Spec: corev1.PodSpec{
		ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: &template.Name}},
		Containers:     []corev1.Container{withClaim(pause, "gpu")},
		Tolerations:    []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
	}}
	asksPlugin := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "asks-nvidia-gpu", Namespace: ns}, Spec: corev1.PodSpec{
		Containers:  []corev1.Container{withLimit(pause, "nvidia.com/gpu")},
		Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
	}}
	Expect(k8s.Create(ctx, claimed)).To(Succeed())
	Expect(k8s.Create(ctx, asksPlugin)).To(Succeed())
	Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(claimed), claimed)).To(Succeed())
		g.Expect(claimed.Spec.NodeName).To(Equal(in.DRA), "the only node whose slices name GPUs")
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(asksPlugin), asksPlugin)).To(Succeed())
		g.Expect(asksPlugin.Spec.NodeName).NotTo(BeEmpty())
		g.Expect(asksPlugin.Spec.NodeName).NotTo(Equal(in.DRA), "the DRA node advertises no nvidia.com/gpu")
		g.Expect(node(g, ctx, asksPlugin.Spec.NodeName).Labels).To(HaveKeyWithValue(gpuv1.LabelAllocationMode, "device-plugin"))
		claims := &resourcev1.ResourceClaimList{}
		g.Expect(k8s.List(ctx, claims, client.InNamespace(ns))).To(Succeed())
		g.Expect(claims.Items).To(HaveLen(1))
		g.Expect(claims.Items[0].Status.Allocation).NotTo(BeNil())
		g.Expect(claims.Items[0].Status.Allocation.Devices.Results).To(ConsistOf(
			HaveField("Driver", draslices.GPUDriver)))
	}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())

	for _, p := range []*corev1.Pod{claimed, asksPlugin} {
		Expect(k8s.Delete(ctx, p, client.GracePeriodSeconds(0))).To(Succeed())
	}
}

// DRAUninstallSpec uninstalls the chart: nothing of the DRA driver is
// left, no DeviceClass, admission policy or slice, nor the workload
// proof's claim templates and PriorityClass.
func DRAUninstallSpec(ctx context.Context, in DRAInput) {
	UninstallSpec(ctx)
	for _, list := range []client.ObjectList{&resourcev1.DeviceClassList{}, &admissionregistrationv1.ValidatingAdmissionPolicyList{},
		&admissionregistrationv1.ValidatingAdmissionPolicyBindingList{}, &resourcev1.ResourceClaimTemplateList{},
		&schedulingv1.PriorityClassList{}} {
		Expect(k8s.List(ctx, list, client.MatchingLabels{render.LabelManagedBy: render.ManagedBy})).To(Succeed())
		Expect(meta.LenList(list)).To(BeZero(), "%T left behind", list)
	}
	Eventually(func(g Gomega) {
		slices := &resourcev1.ResourceSliceList{}
		g.Expect(k8s.List(ctx, slices, client.MatchingFields{"spec.nodeName": in.DRA})).To(Succeed())
		g.Expect(slices.Items).To(BeEmpty(), "the plugin's slices go with it")
	}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
}

func withClaim(c corev1.Container, claim string) corev1.Container {
	c.Resources.Claims = []corev1.ResourceClaim{{Name: claim}}
	return c
}

func withLimit(c corev1.Container, name corev1.ResourceName) corev1.Container {
	c.Resources.Limits = corev1.ResourceList{name: resource.MustParse("1")}
	return c
}
