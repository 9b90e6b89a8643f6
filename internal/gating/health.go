package gating

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/draslices"
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

// UnhealthyDRAGPUs counts the GPUs the DRA driver's ResourceSlices keep
// workloads off with a device taint (NoSchedule or NoExecute, on the GPU
// or one of its MIG devices: an XID error the driver's health check
// saw), and says which, as "GPU-<uuid> (gpu.nvidia.com/xid=79)".
func UnhealthyDRAGPUs(n *draslices.Node) (int64, []string) {
	if n == nil {
		return 0, nil
	}
	var short []string
	for _, gpu := range slices.Sorted(maps.Keys(n.Tainted)) {
		short = append(short, fmt.Sprintf("%s (%s)", gpu, strings.Join(n.Tainted[gpu], ", ")))
	}
	return int64(len(n.Tainted)), short
}

// health records the node's unhealthy GPUs and says when their number
// changes, from the plugin of the node's allocation mode. Only the word of
// a device plugin that has been ready a while counts (Input.HealthSettle):
// when its pod goes or restarts, the kubelet marks every GPU of it
// unhealthy (allocatable 0, capacity kept) while the state stays ready
// for its grace period, so the last count stands until the plugin is back
// and settled. The DRA driver's word is its slices' device taints, while
// its state is ready (its slices proven). A disabled plugin says nothing:
// the count goes, untold.
func (d *decision) health() {
	before := UnhealthyGPUsOf(d.in.Node)
	now, judged := before, false
	var short []string
	if d.mode == gpuv1.AllocationDRA {
		switch d.values[state.DRADriver] {
		case gpuv1.StateReady:
			// A pool being published counts part of the GPUs: the last
			// count stands until it is complete.
			if _, missing := d.missing[state.DRADriver]; !missing && d.in.DRA != nil && d.in.DRA.GPUs > 0 && d.in.DRA.Complete() {
				now, short = UnhealthyDRAGPUs(d.in.DRA)
				judged = true
			}
		case gpuv1.StateDisabled:
			now = 0
		}
		d.tellHealth(before, now, judged, "the DRA driver's device taints say", short)
		return
	}
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
	d.tellHealth(before, now, judged, "the device plugin reports them", short)
}

// tellHealth records the count of unhealthy GPUs and, when a plugin's
// word was judged, says how it changed.
func (d *decision) tellHealth(before, now int64, judged bool, source string, short []string) {
	if now > 0 {
		d.result.Annotations[gpuv1.AnnotationUnhealthyGPUs] = strconv.FormatInt(now, 10)
	}
	if !judged {
		return
	}
	switch {
	case now > before:
		d.event(true, "GPUsUnhealthy", "%d GPU(s) unhealthy, as %s: %s", now, source, strings.Join(short, ", "))
	case now == 0 && before > 0:
		d.event(false, "GPUsHealthy", "every GPU is healthy again")
	case now < before:
		d.event(false, "GPUsUnhealthy", "%d GPU(s) unhealthy, down from %d: %s", now, before, strings.Join(short, ", "))
	}
}
