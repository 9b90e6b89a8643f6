package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/operandpods"
	"github.com/gpu-operator/gpu-operator/internal/state/cudaworkload"
)

// What the kubelet keeps of a container's log as its termination message
// under FallbackToLogsOnError: its last 80 lines, at most 2048 bytes
// (kubernetes v1.37.2 pkg/kubelet/container/runtime.go:
// MaxContainerTerminationMessageLogLines, ...LogLength; read in
// pkg/kubelet/kuberuntime/kuberuntime_container.go).
const (
	kubeletLogLines = 80
	kubeletLogBytes = 2048
)

// verdict reads a run of the CUDA sample on this host (its exit status
// and output) as the operator reads the workload proof's pod: the pod the
// kubelet would report, summarized by the operand pod index and judged
// by cudaworkload.Read. It returns the verdict's line and whether it
// passed.
func verdict(exit int, output string) (string, bool) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
		Containers: []corev1.Container{{Name: cudaworkload.ContainerName}}}}
	pod.Name = "host-check"
	pod.Labels = map[string]string{}
	terminated := &corev1.ContainerStateTerminated{ExitCode: int32(exit), Reason: "Completed"}
	pod.Status.Phase = corev1.PodSucceeded
	if exit != 0 {
		pod.Status.Phase, terminated.Reason, terminated.Message = corev1.PodFailed, "Error", logTail(output)
	}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: cudaworkload.ContainerName,
		State: corev1.ContainerState{Terminated: terminated}}}
	facts := operandpods.Summarize(pod).Facts("", "", time.Minute, time.Now())
	outcome, why := cudaworkload.Read(pod.Name, facts)
	switch outcome {
	case cudaworkload.Passed:
		return "passed: the node's cuda-workload state would be " + string(gpuv1.StateReady), true
	case cudaworkload.Failed:
		return "failed: " + why, false
	}
	return fmt.Sprintf("not judged (outcome %d): %s", outcome, why), false
}

// logTail is what the kubelet keeps of a log as a termination message.
func logTail(s string) string {
	lines := strings.SplitAfter(s, "\n")
	if len(lines) > kubeletLogLines {
		lines = lines[len(lines)-kubeletLogLines:]
	}
	s = strings.Join(lines, "")
	if len(s) > kubeletLogBytes {
		s = s[len(s)-kubeletLogBytes:]
	}
	return s
}

// printVerdict reads the sample's output from r and prints the verdict;
// it reports whether the proof passed.
func printVerdict(w io.Writer, r io.Reader, exit int) (bool, error) {
	out, err := io.ReadAll(r)
	if err != nil {
		return false, err
	}
	line, ok := verdict(exit, string(out))
	_, err = fmt.Fprintln(w, line)
	return ok, err
}
