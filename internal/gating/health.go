package gating

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// UnhealthyGPUs counts the GPUs a node registers but does not offer: the
// device plugin marks a GPU unhealthy (an XID error, a lost device) and the
// kubelet takes it out of allocatable, leaving it in capacity. It says
// which resources fall short, as "nvidia.com/gpu 6 of 8".
func UnhealthyGPUs(n *corev1.Node) (int64, []string) {
	var total int64
	var short []string
	capacity := GPUResources(n.Status.Capacity)
	allocatable := GPUResources(n.Status.Allocatable)
	for _, name := range slices.Sorted(maps.Keys(capacity)) {
		if missing := capacity[name] - allocatable[name]; missing > 0 {
			total += missing
			short = append(short, fmt.Sprintf("%s %d of %d", name, allocatable[name], capacity[name]))
		}
	}
	return total, short
}

// UnhealthyGPUsOf reads the count the operator last recorded on a node.
func UnhealthyGPUsOf(n *corev1.Node) int64 {
	v, err := strconv.ParseInt(n.Annotations[gpuv1.AnnotationUnhealthyGPUs], 10, 64)
	if err != nil || v < 0 {
		return 0
	}
	return v
}

// health records the node's unhealthy GPUs and says when their number
// changes. Only the word of a device plugin that has been ready a while
// counts (Input.HealthSettle): when its pod goes or restarts, the kubelet marks every GPU of it
// unhealthy (allocatable 0, capacity kept) while the state stays ready
// for its grace period, so the last count stands until the plugin is back
// and settled. A disabled plugin says nothing: the count goes, untold.
func (d *decision) health() {
	before := UnhealthyGPUsOf(d.in.Node)
	now, judged := before, false
	var short []string
	switch d.values[state.DevicePlugin] {
	case gpuv1.StateReady:
		pod := d.in.Pods[state.DevicePlugin]
		_, missing := d.missing[state.DevicePlugin]
		if pod == nil || !pod.Ready || !pod.Current || missing {
			break
		}
		if settled := pod.Since.Add(d.in.HealthSettle); d.now.Before(settled) {
			d.requeue(settled.Sub(d.now))
			break
		}
		now, short = UnhealthyGPUs(d.in.Node)
		judged = true
	case gpuv1.StateDisabled:
		now = 0
	}
	if now > 0 {
		d.result.Annotations[gpuv1.AnnotationUnhealthyGPUs] = strconv.FormatInt(now, 10)
	}
	if !judged {
		return
	}
	switch {
	case now > before:
		d.event(true, "GPUsUnhealthy", "%d GPU(s) unhealthy, as the device plugin reports them: %s",
			now, strings.Join(short, ", "))
	case now == 0 && before > 0:
		d.event(false, "GPUsHealthy", "every GPU is healthy again")
	case now < before:
		d.event(false, "GPUsUnhealthy", "%d GPU(s) unhealthy, down from %d: %s", now, before, strings.Join(short, ", "))
	}
}
