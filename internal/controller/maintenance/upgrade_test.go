package maintenance

import (
	"context"
	"maps"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/arbiter"
	"github.com/gpu-operator/gpu-operator/internal/driverpool"
	"github.com/gpu-operator/gpu-operator/internal/operandpods"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// A new driver is validated once the node advertises GPUs, whatever the
// device plugin calls them: whole, shared under a name of their own
// (renameByDefault), or MIG devices.
func TestValidatedOnAnyGPUResource(t *testing.T) {
	pools := driverpool.FromPolicy(&gpuv1.ClusterPolicy{Spec: gpuv1.ClusterPolicySpec{Driver: gpuv1.DriverSpec{Version: "570.172.08"}}})
	labels := map[string]string{
		"feature.node.kubernetes.io/system-os_release.ID": "ubuntu", "feature.node.kubernetes.io/system-os_release.VERSION_ID": "22.04",
		gpuv1.StateLabel(string(state.DevicePlugin)): string(gpuv1.StateReady),
	}
	ds, ok := pools.DaemonSetFor("node", labels)
	if !ok {
		t.Fatal("no driver DaemonSet for the node")
	}
	pod := &operandpods.Pod{DaemonSet: ds, Ready: true, Annotations: []state.Annotation{{Key: render.AnnotationTemplateHash, Value: "h"}}}
	o := &observed{hashes: map[string]string{ds: "h"}, deleting: map[string]bool{}, pools: pools}
	r := &Reconciler{}
	for name, tt := range map[string]struct {
		allocatable corev1.ResourceList
		want        bool
	}{
		"whole GPUs":    {allocatable: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}, want: true},
		"shared GPUs":   {allocatable: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("0"), "nvidia.com/gpu.shared": resource.MustParse("32")}, want: true},
		"MIG devices":   {allocatable: corev1.ResourceList{"nvidia.com/mig-1g.18gb": resource.MustParse("56")}, want: true},
		"no GPU at all": {allocatable: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("0")}, want: false},
	} {
		t.Run(name, func(t *testing.T) {
			n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: labels}, Status: corev1.NodeStatus{Allocatable: tt.allocatable}}
			NewWithT(t).Expect(r.validated(o, n, pod)).To(Equal(tt.want))
		})
	}
}

// On a node in allocation mode dra, a new driver is validated by the DRA
// driver's state alone: it advertises no extended resource, and its state
// is ready only once a plugin started after the driver published slices
// naming the node's GPUs.
func TestValidatedOnADRANode(t *testing.T) {
	pools := driverpool.FromPolicy(&gpuv1.ClusterPolicy{Spec: gpuv1.ClusterPolicySpec{Driver: gpuv1.DriverSpec{Version: "570.172.08"}}})
	base := map[string]string{
		"feature.node.kubernetes.io/system-os_release.ID": "ubuntu", "feature.node.kubernetes.io/system-os_release.VERSION_ID": "22.04",
		gpuv1.LabelAllocationMode: "dra", gpuv1.StateLabel(string(state.DevicePlugin)): string(gpuv1.StateDisabled),
	}
	ds, _ := pools.DaemonSetFor("node", base)
	pod := &operandpods.Pod{DaemonSet: ds, Ready: true, Annotations: []state.Annotation{{Key: render.AnnotationTemplateHash, Value: "h"}}}
	o := &observed{hashes: map[string]string{ds: "h"}, deleting: map[string]bool{}, pools: pools}
	r := &Reconciler{}
	for value, want := range map[gpuv1.StateValue]bool{
		gpuv1.StatePending: false, gpuv1.StateFailed: false, gpuv1.StateReady: true, gpuv1.StateDisabled: true,
	} {
		labels := maps.Clone(base)
		labels[gpuv1.StateLabel(string(state.DRADriver))] = string(value)
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: labels}}
		NewWithT(t).Expect(r.validated(o, n, pod)).To(Equal(want), "dra-driver %s", value)
	}
}

// Which driver pods the upgrade replaces: one of another DaemonSet or a
// newer template, never one the DaemonSet it should have will adopt as it
// is, and none while that DaemonSet is missing or going (a node drained
// towards it would end with no driver).
func TestOutdatedDriverPods(t *testing.T) {
	pools := driverpool.FromPolicy(&gpuv1.ClusterPolicy{Spec: gpuv1.ClusterPolicySpec{Driver: gpuv1.DriverSpec{Version: "570.172.08"}}})
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{
		"feature.node.kubernetes.io/system-os_release.ID": "ubuntu", "feature.node.kubernetes.io/system-os_release.VERSION_ID": "22.04"}}}
	want, _ := pools.DaemonSetFor(n.Name, n.Labels)
	pod := func(ds, workload, hash string) *operandpods.Pod {
		return &operandpods.Pod{DaemonSet: ds, Workload: workload, Annotations: []state.Annotation{{Key: render.AnnotationTemplateHash, Value: hash}}}
	}
	for name, tt := range map[string]struct {
		pod      *operandpods.Pod
		hashes   map[string]string
		deleting map[string]bool
		want     bool
	}{
		"current":                         {pod: pod(want, want, "h"), hashes: map[string]string{want: "h"}},
		"an older template":               {pod: pod(want, want, "old"), hashes: map[string]string{want: "h"}, want: true},
		"another pool's DaemonSet":        {pod: pod("other", "other", "h"), hashes: map[string]string{want: "h", "other": "h"}, want: true},
		"orphaned, to be adopted":         {pod: pod("", want, "h"), hashes: map[string]string{want: "h"}},
		"orphaned, an older template":     {pod: pod("", want, "old"), hashes: map[string]string{want: "h"}, want: true},
		"orphaned by a renamed DaemonSet": {pod: pod("", "renamed", "h"), hashes: map[string]string{want: "h"}, want: true},
		"its DaemonSet going, applied again next": {pod: pod(want, want, "h"), hashes: map[string]string{want: "h"},
			deleting: map[string]bool{want: true}},
		"the wanted DaemonSet not there": {pod: pod("other", "other", "h"), hashes: map[string]string{"other": "h"}},
	} {
		t.Run(name, func(t *testing.T) {
			o := &observed{hashes: tt.hashes, deleting: tt.deleting, pools: pools}
			if o.deleting == nil {
				o.deleting = map[string]bool{}
			}
			NewWithT(t).Expect(o.outdated(tt.pod, n)).To(Equal(tt.want))
		})
	}
}

// A node that is not Ready does not start its upgrade: its kubelet can
// neither let its pods go nor run the new driver, and started it held a
// place of maxParallelUpgrades through its timeouts. Before, x, which
// waited longest, took the one place while its kubelet was down, and y
// waited behind it.
func TestANodeNotReadyDoesNotStartItsUpgrade(t *testing.T) {
	g := NewWithT(t)
	cp := &gpuv1.ClusterPolicy{}
	cp.Spec.Driver.Enabled = ptr.To(true)
	cp.Spec.Driver.UpgradePolicy.AutoUpgrade = ptr.To(true)
	// x, not Ready, counts as unavailable: the test is about
	// maxParallelUpgrades (1 by default).
	cp.Spec.Driver.UpgradePolicy.MaxUnavailable = ptr.To(intstr.FromString("100%"))
	p := &pass{cp: cp, obs: &observed{pools: driverpool.FromPolicy(cp)}, machines: []machine{&upgrades{}}}
	t0 := time.Date(2026, 12, 7, 6, 0, 0, 0, time.UTC)
	required := func(name string, since time.Time) *corev1.Node {
		return gpuNode(name, map[string]string{gpuv1.LabelUpgradeState: string(gpuv1.UpgradeRequired)},
			map[string]string{AnnotationSince: since.Format(time.RFC3339)})
	}
	x, y := required("x", t0), required("y", t0.Add(time.Second))
	x.Status.Conditions[0].Status = corev1.ConditionUnknown

	ctx := context.Background()
	views := []arbiter.Node{p.view(ctx, x), p.view(ctx, y)}
	g.Expect(views[0].Ops[arbiter.DriverUpgrade].Phase).To(Equal(arbiter.Idle), "x waits for its kubelet, not for a place")
	admission, errs := arbiter.Admit(views, budgetsOf(cp, p.obs.pools))
	g.Expect(errs).To(BeEmpty())
	g.Expect(admission.Admitted).To(HaveKeyWithValue("y", arbiter.DriverUpgrade))
	g.Expect(admission.Admitted).NotTo(HaveKey("x"))

	x.Status.Conditions[0].Status = corev1.ConditionTrue
	g.Expect(p.view(ctx, x).Ops[arbiter.DriverUpgrade].Phase).To(Equal(arbiter.Queued), "Ready again, x queues")
}
