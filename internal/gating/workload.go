package gating

import (
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/cudaworkload"
)

// judgeWorkload decides the cuda-workload state once the device plugin is
// ready: ready when a pod of the node's current generation (its driver pod,
// device plugin pod and MIG configuration) ran the CUDA sample, failed
// when one could not. A node without such a pod asks for one (Result.
// Workload). A failed or unrun pod is followed by a new attempt after
// Input.WorkloadRetry.
//
// A proof that stood keeps standing while the next one runs: a device
// plugin rolled to a new spec, or a proof of the node's old generation,
// leaves the node ready (and untainted) until the new proof says
// otherwise. So does a node that was ready before the proof existed on
// it (an operator upgrade that brings it, or a policy that turns it on):
// proving a ready fleet again taints none of it. A node whose driver was
// replaced or that rebooted has its state reset by then, and waits.
func (d *decision) judgeWorkload(cur gpuv1.StateValue) (v gpuv1.StateValue) {
	const name = state.CUDAWorkload
	defer func() {
		if v == gpuv1.StateReady {
			// Nothing waits for a restart of its pod.
			delete(d.notBefore, name)
		}
	}()
	standing := cur == gpuv1.StateReady || (cur == gpuv1.StateDisabled && d.wasReady)
	gen := d.workloadGeneration()
	attempt := 1
	if pod := d.in.Pods[name]; pod != nil && pod.Annotation(cudaworkload.AnnotationGeneration) == gen {
		attempt, _ = strconv.Atoi(pod.Annotation(cudaworkload.AnnotationAttempt))
		podName := cudaworkload.PodName(d.in.Node.Name, cudaworkload.Request{Generation: gen, Attempt: attempt})
		outcome, why := cudaworkload.Read(podName, pod)
		switch outcome {
		case cudaworkload.Passed:
			return gpuv1.StateReady
		case cudaworkload.Running:
			if standing {
				return gpuv1.StateReady
			}
			if cur == gpuv1.StateFailed {
				// The last attempt's verdict stands while the next runs.
				return d.because(name, gpuv1.StateFailed, "the last CUDA workload failed; attempt "+strconv.Itoa(attempt)+" runs in pod "+podName)
			}
			return d.because(name, gpuv1.StatePending, "the CUDA sample runs in pod "+podName)
		}
		if left := d.in.WorkloadRetry - d.now.Sub(pod.Since); left > 0 {
			d.requeue(left)
			if outcome == cudaworkload.NotRun {
				return d.notRun(standing, why)
			}
			if cur != gpuv1.StateFailed {
				d.leave(name, cur, gpuv1.StateFailed, why)
			}
			return d.because(name, gpuv1.StateFailed, why)
		}
		attempt++
		if outcome == cudaworkload.Failed {
			// Still failed while the next attempt runs.
			d.ask(gen, attempt)
			return d.because(name, gpuv1.StateFailed, why)
		}
	}
	if !d.ask(gen, attempt) {
		return d.notRun(standing, "the node advertises no allocatable GPU for the CUDA workload to ask for")
	}
	if standing {
		return gpuv1.StateReady
	}
	return d.because(name, gpuv1.StatePending, "starting the CUDA workload")
}

// notRun is the state while no proof could run on the node: it stands if
// it stood, and waits otherwise.
func (d *decision) notRun(standing bool, why string) gpuv1.StateValue {
	if standing {
		return gpuv1.StateReady
	}
	return d.because(state.CUDAWorkload, gpuv1.StatePending, why)
}

// ask requests the node's CUDA workload pod of a generation and attempt;
// false when the node has no GPU resource to ask for.
func (d *decision) ask(gen string, attempt int) bool {
	res, ok := workloadResource(d.in.Node.Status.Allocatable)
	if !ok {
		return false
	}
	d.result.Workload = &cudaworkload.Request{Generation: gen, Attempt: attempt, Resource: res,
		RuntimeClass: state.RuntimeClassName(&d.in.Policy.Spec, d.variant.Runtime)}
	return true
}

// workloadGeneration names what the node's proof proves: its driver pod
// (none on a host's driver), its device plugin pod and its MIG
// configuration.
func (d *decision) workloadGeneration() string {
	uid := func(n state.Name) string {
		if p := d.in.Pods[n]; p != nil {
			return string(p.UID)
		}
		return ""
	}
	return cudaworkload.Generation(uid(state.Driver), uid(state.DevicePlugin), d.migConfig)
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
