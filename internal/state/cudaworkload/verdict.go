package cudaworkload

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpu-operator/gpu-operator/internal/state"
)

// Outcome is where a CUDA workload pod stands.
type Outcome int

const (
	// Running: the pod has not ended yet.
	Running Outcome = iota
	// Passed: the sample ran on the GPU the pod was given.
	Passed
	// Failed: the workload path is broken on the node, for the reason
	// given: the sample failed, the device plugin refused the GPU, or
	// the image cannot be pulled.
	Failed
	// NotRun: the kubelet did not run the pod, for a reason that says
	// nothing of the GPU stack (no GPU free, memory pressure): it is
	// tried again.
	NotRun
)

// admissionFailure is the reason the kubelet gives a pod whose device
// allocation failed at admission: the device plugin refused the GPU
// (kubernetes pkg/kubelet/lifecycle: UnexpectedAdmissionError).
const admissionFailure = "UnexpectedAdmissionError"

// Read says where a CUDA workload pod stands, and why when it failed or
// did not run.
func Read(name string, f *state.PodFacts) (Outcome, string) {
	switch f.Phase {
	case corev1.PodSucceeded:
		return Passed, ""
	case corev1.PodFailed:
		// The pod's own reason is the kubelet's: it refused or stopped the
		// pod (no GPU free, an eviction, a node shutdown), whatever its
		// container's exit then says; but a device plugin that refuses the
		// GPU breaks the path workloads take.
		exit, exited := f.ExitOf(ContainerName)
		switch {
		case f.Reason == admissionFailure:
			return Failed, fmt.Sprintf("the kubelet could not give pod %s its GPU: %s", name, f.Message)
		case f.Reason != "" || !exited:
			return NotRun, fmt.Sprintf("the kubelet did not run pod %s to its end: %s: %s", name, f.Reason, f.Message)
		}
		return Failed, fmt.Sprintf("the CUDA sample failed in pod %s (exit code %d): %s", name, exit.Code, Explain(exit.Message))
	}
	if f.Failure != "" {
		return Failed, f.Failure
	}
	return Running, ""
}

// cudaErrors are the CUDA runtime's error strings (cudaGetErrorString) a
// failed sample prints, with what each says of the node.
var cudaErrors = []struct{ text, says string }{
	{"system not yet initialized", "CUDA error 802 (cudaErrorSystemNotReady): the GPUs' NVLink fabric is not ready: on NVSwitch " +
		"systems Fabric Manager (nvidia-fabricmanager, which the driver container starts) is not running or has not finished " +
		"training the fabric; see the driver pod's log"},
	{"no CUDA-capable device is detected", "CUDA error 100 (cudaErrorNoDevice): the container got no GPU: the device plugin's " +
		"allocation or the runtime's injection (container toolkit, CDI) did not reach it"},
	{"CUDA driver version is insufficient", "CUDA error 35 (cudaErrorInsufficientDriver): the driver is older than the CUDA " +
		"the sample was built with: set validator.version to an image whose CUDA the driver supports"},
	{"unknown error", "CUDA error 999 (cudaErrorUnknown): a GPU or driver fault, often a GPU fallen off the bus: " +
		"look for Xid errors in the node's kernel log"},
}

// Explain turns the sample's output into one line that says what failed:
// its last lines, and what the CUDA error in them means where it is known.
func Explain(output string) string {
	var lines []string
	for _, l := range strings.Split(output, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		return "it printed nothing"
	}
	if len(lines) > 2 {
		lines = lines[len(lines)-2:]
	}
	out := strings.Join(lines, "; ")
	for _, e := range cudaErrors {
		if strings.Contains(out, e.text) {
			return out + ": " + e.says
		}
	}
	return out
}
