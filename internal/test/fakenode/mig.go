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
	// AnnotationMIGAnchor is the UID of the pod a "-once" fault hit: a
	// test that sets a "-once" fault again removes it first.
	AnnotationMIGAnchor = prefix + "mig-apply-anchor"
	// annotationMIGHandled is "<pod UID>/<configuration>" once that pod
	// handled that configuration: mig-manager acts on its start and on a
	// change of the label, not again on the same value.
	annotationMIGHandled = prefix + "mig-handled"
	// annotationMIGUnder is "<boot ID>/<driver pod UID>" when the node's
	// MIG devices were created: they last as long as both.
	annotationMIGUnder = prefix + "mig-under"
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

// gpuLayout is a fake node's GPUs as mig-manager, a reboot and the
// driver left them.
type gpuLayout struct {
	migconfig.Layout
	// Emptied counts the GPUs in MIG mode whose MIG devices a reboot or a
	// driver reload destroyed: MIG mode survives both, the devices do not
	// (mig-parted v0.15.0 README).
	Emptied int
}

// layoutOf reads a node's MIG layout (AnnotationMIGLayout): "whole=<n>",
// "emptied=<n>" and "<profile>=<count>" pairs, separated by ";".
func layoutOf(n *corev1.Node, gpus int) gpuLayout {
	v, ok := n.Annotations[AnnotationMIGLayout]
	if !ok {
		return gpuLayout{Layout: migconfig.Layout{WholeGPUs: gpus, MIGDevices: map[string]int{}}}
	}
	return parseLayout(v, gpus)
}

// parseLayout reads a layout as gpuLayout.String writes it.
func parseLayout(v string, gpus int) gpuLayout {
	l := gpuLayout{Layout: migconfig.Layout{WholeGPUs: gpus, MIGDevices: map[string]int{}}}
	for _, kv := range strings.Split(v, ";") {
		k, val, _ := strings.Cut(kv, "=")
		c, err := strconv.Atoi(val)
		if err != nil || c < 0 {
			continue
		}
		switch k {
		case "whole":
			l.WholeGPUs = c
		case "emptied":
			l.Emptied = c
		case "":
		default:
			l.MIGDevices[k] = c
		}
	}
	return l
}

func (l gpuLayout) String() string {
	parts := []string{"whole=" + strconv.Itoa(l.WholeGPUs)}
	if l.Emptied > 0 {
		parts = append(parts, "emptied="+strconv.Itoa(l.Emptied))
	}
	for _, p := range l.Profiles() {
		parts = append(parts, fmt.Sprintf("%s=%d", p, l.MIGDevices[p]))
	}
	return strings.Join(parts, ";")
}

// driverGeneration names the boot and the driver the node runs: the
// running driver pod, none on a host's driver. It is "" while a
// container driver is not running.
func driverGeneration(n *corev1.Node, p Profile, driver *corev1.Pod) string {
	switch {
	case p.HostDriver != "":
		return n.Status.NodeInfo.BootID + "/"
	case driver == nil:
		return ""
	}
	return n.Status.NodeInfo.BootID + "/" + string(driver.UID)
}

// loseMIG destroys the node's MIG devices once it runs another boot or
// driver than they were created under, leaving their GPUs in MIG mode
// with none. It says whether the node's annotations changed.
func loseMIG(n *corev1.Node, p Profile, driver *corev1.Pod) bool {
	l := layoutOf(n, p.GPUs)
	under, ok := n.Annotations[annotationMIGUnder]
	now := driverGeneration(n, p, driver)
	if len(l.MIGDevices) == 0 || !ok || now == "" || now == under {
		return false
	}
	l.Emptied = p.GPUs - l.WholeGPUs
	l.MIGDevices = map[string]int{}
	n.Annotations[AnnotationMIGLayout] = l.String()
	delete(n.Annotations, annotationMIGUnder)
	return true
}

// applyMIG plays mig-manager v0.15 on the node while its pod runs
// (mig-parted v0.15.0, pkg/mig/reconfigure/reconfigure.go: Run): for
// each configuration the pod has not handled, it checks the name
// (failed if the file does not hold it), reports success at once if the
// GPUs are partitioned so already, and otherwise goes pending, then, at
// its next look, partitions the GPUs and reports success. It says whether
// the node's labels or annotations changed.
func applyMIG(n *corev1.Node, p Profile, manager, driver *corev1.Pod, configs ConfigLookup) bool {
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
	fault, anchor, uid := a[AnnotationMIGApply], a[AnnotationMIGAnchor], string(manager.UID)
	first := anchor == "" || anchor == uid
	once := func() bool {
		if anchor == uid {
			return false
		}
		a[AnnotationMIGAnchor] = uid
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
	if same(layoutOf(n, p.GPUs), want) {
		return finish(gpuv1.MIGConfigSuccess)
	}
	if n.Labels[gpuv1.LabelMIGConfigState] != gpuv1.MIGConfigPending {
		return setState(gpuv1.MIGConfigPending)
	}
	a[AnnotationMIGLayout] = gpuLayout{Layout: want}.String()
	delete(a, annotationMIGUnder)
	if len(want.MIGDevices) > 0 {
		a[annotationMIGUnder] = driverGeneration(n, p, driver)
	}
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

func same(a gpuLayout, b migconfig.Layout) bool {
	return a.Emptied == 0 && a.WholeGPUs == b.WholeGPUs && maps.Equal(a.MIGDevices, b.MIGDevices)
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
// v0.20.0, internal/lm/mig-strategy.go); INVALID for a layout the
// strategy cannot label.
func migProduct(l gpuLayout, gpus int, strategy string) (string, int, bool) {
	if strategy == string(gpuv1.MIGStrategyMixed) || l.WholeGPUs == gpus {
		return "", 0, false // no GPU has MIG enabled
	}
	profiles := l.Profiles()
	if len(profiles) != 1 || l.WholeGPUs > 0 || l.Emptied > 0 {
		return "-MIG-INVALID", 0, true
	}
	return "-MIG-" + strings.ReplaceAll(profiles[0], "+", "."), l.MIGDevices[profiles[0]], true
}

// migResources are the resources a layout advertises, as the device
// plugin's (k8s-device-plugin v0.20.0, internal/rm/device_map.go and
// rm.go), written here apart from the operator's migconfig so that the
// simulator checks it: whole GPUs as nvidia.com/gpu; MIG devices as
// nvidia.com/mig-<profile> ('+' as '.') under mixed, as nvidia.com/gpu
// under single, where every GPU must be partitioned alike. Nil when the
// plugin would not start: single on a mixed layout, or on a GPU in MIG
// mode whose devices a reboot destroyed ("at least one device with
// migEnabled=true was not configured correctly").
func migResources(l gpuLayout, strategy string, replicas int) map[corev1.ResourceName]int64 {
	raw := map[corev1.ResourceName]int{}
	switch {
	case strategy != string(gpuv1.MIGStrategyMixed) && l.Emptied > 0:
		return nil
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
