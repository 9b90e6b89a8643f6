package gating

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/draslices"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/cudaworkload"
)

// judgeWorkload decides the cuda-workload state once the node's plugin
// (the device plugin, or the DRA driver on a DRA node) is ready: ready
// when a pod of the node's current generation (its boot, its driver pod,
// plugin pod and MIG configuration) ran the CUDA sample, failed when one
// could not. A node without such a pod asks for one
// (Result.Workload), once the pods it would prove have settled. A failed,
// unrun or unended pod is followed by a new attempt after
// Input.WorkloadRetry; one the scheduler has not placed (on a DRA node)
// waits for it instead.
//
// The last verdict stands until the next one: a device plugin rolled to a
// new spec leaves the node ready (and untainted), or failed, until the new
// proof says otherwise. So does a node ready before the state was ever
// labelled on it (an operator upgrade that brings the proof to a ready
// fleet). A node whose driver was replaced or that rebooted has its state
// reset by then, and waits.
func (d *decision) judgeWorkload(cur gpuv1.StateValue) (v gpuv1.StateValue) {
	const name = state.CUDAWorkload
	defer func() {
		if v == gpuv1.StateReady {
			// Nothing waits for a restart of its pod.
			delete(d.notBefore, name)
		}
	}()
	_, labelled := d.in.Node.Labels[gpuv1.StateLabel(string(name))]
	standing := cur == gpuv1.StateReady || (!labelled && d.wasReady)
	gen, settled := d.workloadGeneration(standing)
	if !settled {
		return d.keep(cur, standing, "waiting for the driver and device plugin pods to settle before the CUDA workload")
	}
	attempt := 1
	if pod := d.in.Pods[name]; pod != nil && pod.Annotation(cudaworkload.AnnotationGeneration) == gen {
		attempt, _ = strconv.Atoi(pod.Annotation(cudaworkload.AnnotationAttempt))
		outcome, why := cudaworkload.Read(pod.Name, pod)
		left := d.in.WorkloadRetry - d.now.Sub(pod.Since)
		if outcome == cudaworkload.Running {
			if pod.Unscheduled != "" {
				// On a DRA node, the scheduler has not placed it: every
				// device held by workloads or tainted, the node cordoned
				// or held for maintenance, or full. That says nothing of
				// CUDA, and the scheduler tries again as the cluster
				// changes: it waits there, holding no GPU and no place of
				// the bound, until then or until its generation passes.
				return d.keep(cur, standing, fmt.Sprintf("attempt %d waits for the scheduler in pod %s: %s",
					attempt, pod.Name, pod.Unscheduled))
			}
			if left > 0 {
				d.requeue(left)
				return d.keep(cur, standing, fmt.Sprintf("attempt %d runs in pod %s", attempt, pod.Name))
			}
			// vectorAdd ends within a second of starting: a CUDA call
			// hangs, or the container never started. The next attempt's
			// pod replaces this one, and frees its GPU.
			outcome, why = cudaworkload.Failed, fmt.Sprintf("the CUDA workload in pod %s has not ended within %s (pod %s): "+
				"a CUDA call hangs, or its container never started", pod.Name, d.in.WorkloadRetry, pod.Phase)
		}
		switch {
		case outcome == cudaworkload.Passed:
			return gpuv1.StateReady
		case left > 0:
			d.requeue(left)
			if outcome == cudaworkload.NotRun {
				return d.keep(cur, standing, why)
			}
			return d.fail(cur, why)
		}
		attempt = nextAttempt(d.in.Node.Name, gen, attempt, pod.Name)
		if outcome == cudaworkload.Failed {
			// Still failed while the next attempt runs.
			d.ask(gen, attempt)
			return d.fail(cur, why)
		}
	}
	if why := d.ask(gen, attempt); why != "" {
		return d.keep(cur, standing, why)
	}
	return d.keep(cur, standing, "starting the CUDA workload")
}

// keep is the state while no verdict of the current generation is in:
// the last one stands. A proof that stood leaves the node ready; a failed
// one leaves it failed, its reason kept in the events; otherwise the
// node waits.
func (d *decision) keep(cur gpuv1.StateValue, standing bool, why string) gpuv1.StateValue {
	switch {
	case standing:
		return gpuv1.StateReady
	case cur == gpuv1.StateFailed:
		return d.because(state.CUDAWorkload, gpuv1.StateFailed, "the last CUDA workload failed (see the node's events); "+why)
	}
	return d.because(state.CUDAWorkload, gpuv1.StatePending, why)
}

// fail makes the state failed, told once, when it turns so.
func (d *decision) fail(cur gpuv1.StateValue, why string) gpuv1.StateValue {
	if cur != gpuv1.StateFailed {
		d.leave(state.CUDAWorkload, cur, gpuv1.StateFailed, why)
	}
	return d.because(state.CUDAWorkload, gpuv1.StateFailed, why)
}

// workloadLeftBehind deletes the node's CUDA workload pod that has not
// ended while the state cannot run it: the driver is being replaced or
// a prerequisite left, and a pod holding a GPU would keep an upgrade, a
// repair or a MIG reconfiguration waiting for the node's GPU clients.
func (d *decision) workloadLeftBehind() {
	const name = state.CUDAWorkload
	pod := d.in.Pods[name]
	if pod == nil || pod.Phase == corev1.PodSucceeded || pod.Phase == corev1.PodFailed {
		return
	}
	up := d.values[name] != gpuv1.StateUpgrading
	for _, p := range d.in.Graph.Prerequisites(name) {
		up = up && d.values[p].Up()
	}
	if !up {
		d.result.StalePods = append(d.result.StalePods, name)
	}
}

// nextAttempt is the attempt after a pod's: one whose pod name is not the
// pod's own, whatever a person wrote in its attempt annotation.
func nextAttempt(node, gen string, attempt int, podName string) int {
	next := max(attempt, 0) + 1
	for cudaworkload.PodName(node, cudaworkload.Request{Generation: gen, Attempt: next}) == podName {
		next++
	}
	return next
}

// ask requests the node's CUDA workload pod of a generation and attempt,
// asking for one GPU the way the node's workloads ask: the device plugin's
// extended resource, or on a DRA node a device of one of the DRA driver's
// classes. It says why not when the node has no GPU to ask for.
func (d *decision) ask(gen string, attempt int) string {
	req := &cudaworkload.Request{Generation: gen, Attempt: attempt}
	if d.mode == gpuv1.AllocationDRA {
		class, ok := workloadDeviceClass(d.in.DRA)
		if !ok {
			return "the node's ResourceSlices name no GPU or MIG device for the CUDA workload to claim"
		}
		req.DeviceClass = class
	} else {
		res, ok := workloadResource(d.in.Node.Status.Allocatable)
		if !ok {
			return "the node advertises no allocatable GPU for the CUDA workload to ask for"
		}
		req.Resource, req.RuntimeClass = res, state.RuntimeClassName(&d.in.Policy.Spec, d.variant.Runtime)
	}
	d.result.Workload = req
	return ""
}

// workloadDeviceClass is the DeviceClass the proof on a DRA node claims a
// device of: a whole GPU where the node's slices name one, else a MIG
// device. Unlike the device plugin's path, a whole GPU comes first: a GPU
// the DRA driver publishes whole is out of MIG mode, and under DynamicMIG
// a claimed MIG device would be created for the proof and destroyed after.
func workloadDeviceClass(n *draslices.Node) (string, bool) {
	switch {
	case n == nil:
		return "", false
	case n.WholeGPUs > 0:
		return cudaworkload.GPUDeviceClass, true
	}
	for _, count := range n.MIGDevices {
		if count > 0 {
			return cudaworkload.MIGDeviceClass, true
		}
	}
	return "", false
}

// workloadGeneration names what the node's proof proves: its boot (a
// reboot proves again what restarted in place), its driver pod (none on
// a host's driver), its plugin pod (the device plugin's, or on a DRA node
// the DRA driver's kubelet plugin) and its MIG configuration. It is not
// settled while those pods are being replaced or have just started: the
// plugin must be current and ready, and a container driver ready; a proof
// then would meet a kubelet with no device to allocate.
// Where a proof stands, the plugin pod must also have been ready for
// Input.HealthSettle, as for its word on the GPUs: a rolled plugin's new
// pod is ready before the kubelet has its devices. Elsewhere the device
// plugin's state turned ready only once the node advertised its GPUs.
func (d *decision) workloadGeneration(standing bool) (string, bool) {
	plugin := d.in.Pods[state.DevicePlugin]
	if d.mode == gpuv1.AllocationDRA {
		plugin = d.in.Pods[state.DRADriver]
	}
	if plugin == nil || !plugin.Ready || !plugin.Current {
		return "", false
	}
	if left := d.in.HealthSettle - d.now.Sub(plugin.Since); standing && left > 0 {
		d.requeue(left)
		return "", false
	}
	driver := ""
	if d.variant.DriverRoot != gpuv1.DriverRootHost {
		p := d.in.Pods[state.Driver]
		if p == nil || !p.Ready {
			return "", false
		}
		driver = string(p.UID)
	}
	return cudaworkload.Generation(d.in.Node.Status.NodeInfo.BootID, driver, string(plugin.UID), d.migConfig), true
}

// workloadResource is the GPU resource the proof asks one of: a MIG
// device where the node advertises one, else a whole or shared GPU, as
// NVIDIA's plugin validation picks; by name among several, so that the
// choice is stable.
func workloadResource(allocatable corev1.ResourceList) (corev1.ResourceName, bool) {
	var mig, gpu []corev1.ResourceName
	for res, q := range allocatable {
		if !IsGPUResource(res) || q.Value() < 1 {
			continue
		}
		if strings.HasPrefix(string(res), "nvidia.com/mig-") {
			mig = append(mig, res)
		} else {
			gpu = append(gpu, res)
		}
	}
	for _, list := range [][]corev1.ResourceName{mig, gpu} {
		if len(list) > 0 {
			slices.Sort(list)
			return list[0], true
		}
	}
	return "", false
}
