package state

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// CrashLoopRestarts is how many restarts of a crash-looping container make
// its state failed rather than merely not ready.
const CrashLoopRestarts = 3

// waitingFailures are container waiting reasons that do not heal by
// themselves; past the grace period they make the state failed.
var waitingFailures = map[string]bool{
	"ErrImagePull":               true,
	"ImagePullBackOff":           true,
	"InvalidImageName":           true,
	"CreateContainerConfigError": true,
	"CreateContainerError":       true,
	"RunContainerError":          true,
}

// PodFacts is what the judgement of a state on a node needs to know about
// the state's pod there.
type PodFacts struct {
	UID types.UID
	// Ready is the pod's Ready condition.
	Ready bool
	// Since is when Ready last changed, or the pod's creation when it has no
	// Ready condition yet.
	Since time.Time
	// Current is true when the pod runs the desired pod template.
	Current bool
	// Failure says why the pod will not become ready by itself; empty when
	// nothing says so.
	Failure string
	// Annotations are the pod's, as cached (the operator's own only).
	Annotations map[string]string
	// Exits holds the last exit of each init container that exited, by
	// container name: a check's verdict travels in its exit code and
	// termination message.
	Exits map[string]Exit
}

// Exit is how a container last exited.
type Exit struct {
	Code    int32
	Message string
}

// Observe reduces a state's pod on a node to PodFacts. A missing or
// terminating pod gives nil. desiredHash is the template hash of the
// state's DaemonSet; a pod carrying another one runs an older spec.
func Observe(pod *corev1.Pod, hashAnnotation, desiredHash string, grace time.Duration, now time.Time) *PodFacts {
	if pod == nil || pod.DeletionTimestamp != nil {
		return nil
	}
	f := &PodFacts{
		UID:         pod.UID,
		Annotations: pod.Annotations,
		Since:       pod.CreationTimestamp.Time,
		Current:     desiredHash == "" || pod.Annotations[hashAnnotation] == desiredHash,
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			f.Ready = c.Status == corev1.ConditionTrue
			if !c.LastTransitionTime.IsZero() {
				f.Since = c.LastTransitionTime.Time
			}
		}
	}
	if !f.Ready {
		f.Failure = failure(pod, now.Sub(f.Since) >= grace)
	}
	for _, cs := range pod.Status.InitContainerStatuses {
		t := cs.State.Terminated
		if t == nil {
			t = cs.LastTerminationState.Terminated
		}
		if t != nil {
			if f.Exits == nil {
				f.Exits = map[string]Exit{}
			}
			f.Exits[cs.Name] = Exit{Code: t.ExitCode, Message: t.Message}
		}
	}
	return f
}

// failure names what keeps a pod from ever becoming ready on its own.
// Image and container-creation errors count only once pastGrace, since a
// registry hiccup heals.
func failure(pod *corev1.Pod, pastGrace bool) string {
	if pod.Status.Phase == corev1.PodFailed {
		return fmt.Sprintf("pod %s failed: %s", pod.Name, pod.Status.Reason)
	}
	statuses := append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...)
	for _, cs := range statuses {
		w := cs.State.Waiting
		if w == nil {
			continue
		}
		switch {
		case w.Reason == "CrashLoopBackOff" && cs.RestartCount >= CrashLoopRestarts:
			return fmt.Sprintf("container %s of pod %s is crash-looping (%d restarts)", cs.Name, pod.Name, cs.RestartCount)
		case waitingFailures[w.Reason] && pastGrace:
			return fmt.Sprintf("container %s of pod %s: %s: %s", cs.Name, pod.Name, w.Reason, w.Message)
		}
	}
	return ""
}
