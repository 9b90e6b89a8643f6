package fakenode

import (
	"fmt"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gpu-operator/gpu-operator/internal/draslices"
	"github.com/gpu-operator/gpu-operator/internal/state/dradriver"
)

// XIDTaint is the device taint the simulated DRA driver puts on an
// unhealthy GPU: an XID 79 (fallen off the bus), as the driver does with
// NVMLDeviceHealthCheck on (cmd/gpu-kubelet-plugin/device_health.go at
// kubernetes-sigs/dra-driver-nvidia-gpu 95932046).
var XIDTaint = resourcev1.DeviceTaint{Key: "gpu.nvidia.com/xid", Value: "79", Effect: resourcev1.DeviceTaintEffectNoSchedule}

// annotationDRALayout is "<plugin pod UID>|<layout>": the node's GPUs as
// its DRA driver's kubelet plugin found them when it started. The driver
// enumerates the GPUs and their MIG devices once, at its start, and
// publishes that until it restarts (kubernetes-sigs/dra-driver-nvidia-gpu
// 95932046, cmd/gpu-kubelet-plugin/nvlib.go: enumerateAllPossibleDevices).
const annotationDRALayout = prefix + "dra-layout"

// enumerateDRA records what the node's DRA plugin, running, found at its
// start: the layout of its first look. It says whether the node's
// annotations changed.
func enumerateDRA(n *corev1.Node, p Profile, plugin *corev1.Pod) bool {
	if plugin == nil || plugin.UID == "" {
		return false
	}
	if uid, _, _ := strings.Cut(n.Annotations[annotationDRALayout], "|"); uid == string(plugin.UID) {
		return false
	}
	if n.Annotations == nil {
		n.Annotations = map[string]string{}
	}
	n.Annotations[annotationDRALayout] = string(plugin.UID) + "|" + layoutOf(n, p.GPUs).String()
	return true
}

// draLayout is the layout the plugin publishes: the one it found at its
// start, or, before that is recorded, the node's now.
func draLayout(n *corev1.Node, p Profile, plugin *corev1.Pod) gpuLayout {
	if uid, v, ok := strings.Cut(n.Annotations[annotationDRALayout], "|"); ok && uid == string(plugin.UID) {
		return parseLayout(v, p.GPUs)
	}
	return layoutOf(n, p.GPUs)
}

// DRASlices are the ResourceSlices the DRA driver's kubelet plugin
// publishes for a node while plugin, its pod there, runs: one slice of
// the node's GPUs (driver gpu.nvidia.com, pool named after the node) and,
// with the compute-domains container, one of its IMEX channel and daemon
// (compute-domain.nvidia.com). The GPU slice holds the GPUs as the plugin
// found them at its start: a GPU out of MIG mode as itself (gpu-<index>),
// a GPU in MIG mode as its MIG devices (type mig, with its profile and
// parentUUID), and a GPU in MIG mode without MIG devices not at all.
// Unhealthy GPUs, and their MIG devices, carry XIDTaint when the pod's
// FEATURE_GATES turn NVMLDeviceHealthCheck on; without it the driver
// publishes no health. Nil when plugin is nil or not Ready: the kubelet
// removes a stopped plugin's slices. A plugin that does not reach the
// node's kubelet root publishes nothing either: the kubelet never finds
// its registration socket.
func DRASlices(n *corev1.Node, plugin *corev1.Pod) []*resourcev1.ResourceSlice {
	if plugin == nil || plugin.DeletionTimestamp != nil || !PodReady(plugin) {
		return nil
	}
	p := ProfileOf(n)
	if !draPluginRegisters(p, plugin) {
		return nil
	}
	health := strings.Contains(envOf(plugin, dradriver.GPUContainer, "FEATURE_GATES"), "NVMLDeviceHealthCheck=true")
	taint := func(d *resourcev1.Device, gpu int) {
		if health && gpu < p.Unhealthy {
			d.Taints = []resourcev1.DeviceTaint{XIDTaint}
		}
	}
	l := draLayout(n, p, plugin)
	var devices []resourcev1.Device
	for i := range min(l.WholeGPUs, p.GPUs) {
		d := resourcev1.Device{
			Name: fmt.Sprintf("gpu-%d", i),
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
				"type":                  {StringValue: ptr.To(draslices.TypeGPU)},
				"uuid":                  {StringValue: ptr.To(gpuUUID(n, i))},
				"productName":           {StringValue: ptr.To("NVIDIA H200")},
				"architecture":          {StringValue: ptr.To("Hopper")},
				"cudaComputeCapability": {VersionValue: ptr.To("9.0.0")},
			},
			Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"memory": {Value: resource.MustParse("141Gi")}},
		}
		taint(&d, i)
		devices = append(devices, d)
	}
	// The MIG devices, spread over the GPUs in MIG mode that have any.
	partitioned, next := p.GPUs-l.WholeGPUs-l.Emptied, 0
	for _, profile := range l.Profiles() {
		for k := range l.MIGDevices[profile] {
			if partitioned <= 0 {
				break
			}
			gpu := l.WholeGPUs + next%partitioned
			next++
			d := resourcev1.Device{
				Name: fmt.Sprintf("gpu-%d-mig-%s-%d", gpu, strings.NewReplacer(".", "", "+", "-").Replace(profile), k),
				Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
					"type":        {StringValue: ptr.To(draslices.TypeMIG)},
					"uuid":        {StringValue: ptr.To(fmt.Sprintf("MIG-%s-%d-%s-%d", n.Name, gpu, profile, k))},
					"parentUUID":  {StringValue: ptr.To(gpuUUID(n, gpu))},
					"profile":     {StringValue: ptr.To(profile)},
					"productName": {StringValue: ptr.To("NVIDIA H200")},
				},
			}
			taint(&d, gpu)
			devices = append(devices, d)
		}
	}
	out := []*resourcev1.ResourceSlice{slice(n, draslices.GPUDriver, devices)}
	if hasContainer(plugin, dradriver.ComputeDomainContainer) {
		out = append(out, slice(n, draslices.ComputeDomainDriver, []resourcev1.Device{
			{Name: "channel-0", Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
				"type": {StringValue: ptr.To("channel")}, "id": {IntValue: ptr.To[int64](0)}}},
			{Name: "daemon-0", Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
				"type": {StringValue: ptr.To("daemon")}, "id": {IntValue: ptr.To[int64](0)}}},
		}))
	}
	return out
}

// draPluginRegisters reports whether the plugin's pod mounts the node's
// kubelet plugin directories: the kubelet finds a DRA plugin through its
// socket under <root>/plugins_registry and talks to it under
// <root>/plugins (kubernetes-sigs/dra-driver-nvidia-gpu 95932046,
// cmd/gpu-kubelet-plugin/main.go: --kubelet-registrar-directory-path,
// --kubelet-plugins-directory-path).
func draPluginRegisters(p Profile, plugin *corev1.Pod) bool {
	mounted := func(host string) bool {
		for _, v := range plugin.Spec.Volumes {
			if v.HostPath != nil && path.Clean(v.HostPath.Path) == host {
				return true
			}
		}
		return false
	}
	return mounted(path.Join(p.KubeletRoot, "plugins_registry")) && mounted(path.Join(p.KubeletRoot, "plugins"))
}

// gpuUUID is the UUID of a fake node's GPU.
func gpuUUID(n *corev1.Node, index int) string { return fmt.Sprintf("GPU-%s-%d", n.Name, index) }

// slice is one driver's slice of a node, owned by the node as the
// kubelet's helper makes it, so that it goes with the node.
func slice(n *corev1.Node, driver string, devices []resourcev1.Device) *resourcev1.ResourceSlice {
	return &resourcev1.ResourceSlice{
		TypeMeta: metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "ResourceSlice"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            DRASliceName(n.Name, driver),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: n.Name, UID: n.UID}},
		},
		Spec: resourcev1.ResourceSliceSpec{
			Driver:   driver,
			Pool:     resourcev1.ResourcePool{Name: n.Name, Generation: 1, ResourceSliceCount: 1},
			NodeName: ptr.To(n.Name),
			Devices:  devices,
		},
	}
}

// DRASliceName names a node's slice of a driver; the real driver's are
// generated (<index>-<driver>-<node>-<random>), one name per node here so
// that the simulator updates rather than duplicates.
func DRASliceName(node, driver string) string { return driver + "-" + node }

func hasContainer(p *corev1.Pod, name string) bool {
	for _, c := range p.Spec.Containers {
		if c.Name == name {
			return true
		}
	}
	return false
}

func envOf(p *corev1.Pod, container, name string) string {
	for _, c := range p.Spec.Containers {
		if c.Name != container {
			continue
		}
		for _, e := range c.Env {
			if e.Name == name {
				return e.Value
			}
		}
	}
	return ""
}

// SliceChanges says what makes the NVIDIA driver slices a simulator finds
// (have) into those its nodes' plugins publish (want): the slices to
// create, to update (carrying have's resource version), and to delete.
// Other drivers' slices are left alone.
func SliceChanges(have, want []*resourcev1.ResourceSlice) (create, update, remove []*resourcev1.ResourceSlice) {
	wanted := make(map[string]*resourcev1.ResourceSlice, len(want))
	for _, rs := range want {
		wanted[rs.Name] = rs
	}
	for _, cur := range have {
		if cur.Spec.Driver != draslices.GPUDriver && cur.Spec.Driver != draslices.ComputeDomainDriver {
			continue
		}
		next, keep := wanted[cur.Name]
		delete(wanted, cur.Name)
		switch {
		case !keep:
			remove = append(remove, cur)
		case !apiequality.Semantic.DeepEqual(cur.Spec, next.Spec):
			next = next.DeepCopy()
			next.ResourceVersion = cur.ResourceVersion
			update = append(update, next)
		}
	}
	for _, rs := range want {
		if _, left := wanted[rs.Name]; left {
			create = append(create, rs)
		}
	}
	return create, update, remove
}
