package fakenode

import (
	"fmt"
	"maps"
	"path"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/migconfig"
)

// Annotations of a fake node's MIG devices.
const (
	// AnnotationMIGLayout is how the node's GPUs are partitioned, as
	// mig-manager left them: "whole=<n>" and "<profile>=<count>" pairs,
	// separated by ";". Absent: every GPU whole.
	AnnotationMIGLayout = prefix + "mig-layout"
	// AnnotationMIGApply makes the node's mig-manager misbehave: "fail"
	// (it reports failed), "hang" (it stays pending), or "fail-once" and
	// "hang-once", which misbehave under the first mig-manager pod only.
	AnnotationMIGApply = prefix + "mig-apply"
	// annotationMIGAnchor is the UID of the pod a "-once" fault hit.
	annotationMIGAnchor = prefix + "mig-apply-anchor"
	// annotationMIGHandled is "<pod UID>/<configuration>" once that pod
	// handled that configuration: mig-manager acts on its start and on a
	// change of the label, not again on the same value.
	annotationMIGHandled = prefix + "mig-handled"
)

// Faults of a fake mig-manager (AnnotationMIGApply).
const (
	MIGFail     = "fail"
	MIGHang     = "hang"
	MIGFailOnce = "fail-once"
	MIGHangOnce = "hang-once"
)

// migConfigDir is where mig-manager's pod mounts its configuration file.
const migConfigDir = "/mig-parted-config"

// LayoutOf reads a node's MIG layout (AnnotationMIGLayout).
func LayoutOf(n *corev1.Node, gpus int) migconfig.Layout {
	l := migconfig.Layout{WholeGPUs: gpus, MIGDevices: map[string]int{}}
	v, ok := n.Annotations[AnnotationMIGLayout]
	if !ok {
		return l
	}
	for _, kv := range strings.Split(v, ";") {
		k, val, _ := strings.Cut(kv, "=")
		c, err := strconv.Atoi(val)
		if err != nil || c < 0 {
			continue
		}
		if k == "whole" {
			l.WholeGPUs = c
		} else if k != "" {
			l.MIGDevices[k] = c
		}
	}
	return l
}

func layoutString(l migconfig.Layout) string {
	parts := []string{"whole=" + strconv.Itoa(l.WholeGPUs)}
	for _, p := range l.Profiles() {
		parts = append(parts, fmt.Sprintf("%s=%d", p, l.MIGDevices[p]))
	}
	return strings.Join(parts, ";")
}

// applyMIG plays mig-manager v0.12 on the node while its pod runs
// (mig-parted v0.12.1, deployments/container/reconfigure-mig.sh): for
// each configuration the pod has not handled, it checks the name
// (failed if the file does not hold it), reports success at once if the
// GPUs are partitioned so already, and otherwise goes pending, then, at
// its next look, partitions the GPUs and reports success. It says whether
// the node's labels or annotations changed.
func applyMIG(n *corev1.Node, p Profile, manager *corev1.Pod, configs ConfigLookup) bool {
	config := n.Labels[gpuv1.LabelMIGConfig]
	if manager == nil || config == "" {
		return false
	}
	if n.Annotations == nil {
		n.Annotations = map[string]string{}
	}
	a := n.Annotations
	handled := string(manager.UID) + "/" + config
	if a[annotationMIGHandled] == handled {
		return false
	}
	setState := func(s string) bool {
		if n.Labels[gpuv1.LabelMIGConfigState] == s {
			return false
		}
		n.Labels[gpuv1.LabelMIGConfigState] = s
		return true
	}
	finish := func(s string) bool {
		setState(s)
		a[annotationMIGHandled] = handled
		return true
	}
	// A "-once" fault hits the first pod that meets it, and only it.
	fault, anchor, uid := a[AnnotationMIGApply], a[annotationMIGAnchor], string(manager.UID)
	first := anchor == "" || anchor == uid
	once := func() bool {
		if anchor == uid {
			return false
		}
		a[annotationMIGAnchor] = uid
		return true
	}
	switch {
	case fault == MIGHang:
		return setState(gpuv1.MIGConfigPending)
	case fault == MIGHangOnce && first:
		return once() || setState(gpuv1.MIGConfigPending)
	case fault == MIGFail:
		return finish(gpuv1.MIGConfigFailed)
	case fault == MIGFailOnce && first:
		once()
		return finish(gpuv1.MIGConfigFailed)
	}
	file := readMIGFile(manager, configs)
	if file == nil {
		return finish(gpuv1.MIGConfigFailed)
	}
	want, err := file.LayoutOf(config, p.GPUs)
	if err != nil {
		return finish(gpuv1.MIGConfigFailed)
	}
	if same(LayoutOf(n, p.GPUs), want) {
		return finish(gpuv1.MIGConfigSuccess)
	}
	if n.Labels[gpuv1.LabelMIGConfigState] != gpuv1.MIGConfigPending {
		return setState(gpuv1.MIGConfigPending)
	}
	a[AnnotationMIGLayout] = layoutString(want)
	return finish(gpuv1.MIGConfigSuccess)
}

// readMIGFile reads the configuration file mig-manager's pod mounts.
func readMIGFile(pod *corev1.Pod, configs ConfigLookup) *migconfig.File {
	if configs == nil || len(pod.Spec.Containers) == 0 {
		return nil
	}
	cm := configMapAt(pod, migConfigDir)
	data, ok := configs(pod.Namespace, cm, path.Base(migconfig.FileKey))
	if cm == "" || !ok {
		return nil
	}
	f, err := migconfig.Parse(data)
	if err != nil {
		return nil
	}
	return f
}

func same(a, b migconfig.Layout) bool {
	return a.WholeGPUs == b.WholeGPUs && maps.Equal(a.MIGDevices, b.MIGDevices)
}

// migStrategyOf reads a pod's MIG_STRATEGY; single when unset.
func migStrategyOf(pod *corev1.Pod) string {
	if pod != nil && len(pod.Spec.Containers) > 0 {
		for _, e := range pod.Spec.Containers[0].Env {
			if e.Name == "MIG_STRATEGY" {
				return e.Value
			}
		}
	}
	return string(gpuv1.MIGStrategySingle)
}

// migProduct is GFD's product label for a layout under the single
// strategy: the MIG profile after the GPU's name (k8s-device-plugin
// v0.17.2, internal/lm/mig-strategy.go); INVALID for a layout the
// strategy cannot label.
func migProduct(l migconfig.Layout, gpus int, strategy string) (string, int, bool) {
	if strategy == string(gpuv1.MIGStrategyMixed) || l.WholeGPUs == gpus {
		return "", 0, false // no GPU has MIG enabled
	}
	profiles := l.Profiles()
	if len(profiles) != 1 || l.WholeGPUs > 0 {
		return "-MIG-INVALID", 0, true
	}
	return "-MIG-" + strings.ReplaceAll(profiles[0], "+", "."), l.MIGDevices[profiles[0]], true
}

// migResources are the resources a layout advertises, as the device
// plugin's (k8s-device-plugin v0.17.2, internal/rm/device_map.go and
// rm.go), written here apart from the operator's migconfig so that the
// simulator checks it: whole GPUs as nvidia.com/gpu; MIG devices as
// nvidia.com/mig-<profile> ('+' as '.') under mixed, as nvidia.com/gpu
// under single, where every GPU must be partitioned alike. Nil when the
// plugin would not start (single on a mixed layout).
func migResources(l migconfig.Layout, strategy string, replicas int) map[corev1.ResourceName]int64 {
	raw := map[corev1.ResourceName]int{}
	switch {
	case strategy == string(gpuv1.MIGStrategyMixed):
		if l.WholeGPUs > 0 {
			raw["nvidia.com/gpu"] = l.WholeGPUs
		}
		for p, n := range l.MIGDevices {
			raw[corev1.ResourceName("nvidia.com/mig-"+strings.ReplaceAll(p, "+", "."))] = n
		}
	case len(l.MIGDevices) == 0:
		if l.WholeGPUs > 0 {
			raw["nvidia.com/gpu"] = l.WholeGPUs
		}
	case len(l.MIGDevices) > 1 || l.WholeGPUs > 0:
		return nil
	default:
		for _, n := range l.MIGDevices {
			raw["nvidia.com/gpu"] = n
		}
	}
	out := map[corev1.ResourceName]int64{}
	for name, n := range raw {
		out[name] = int64(n * max(replicas, 1))
	}
	return out
}
