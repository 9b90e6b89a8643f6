package driverpool

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/operandpods"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// A precompiled image exists for a kernel only if NVIDIA published it, and
// nothing but a pull says so with the node's own registry access. Before a
// node is moved to a kernel's image, one pod per image pulls it on a node
// that boots that kernel and exits: its outcome is the verdict, kept in
// the API (it survives an operator restart) and retried by the kubelet's
// own pull back-off, so an image published later is found without anyone
// acting. The pull is not wasted: the driver pod starts from it.

// CheckState is the state label of the image check pods. It is no state
// of the graph: nothing gates on it.
const CheckState state.Name = "driver-image-check"

// AnnotationImage is on an image check pod: the image it pulls.
const AnnotationImage = gpuv1.OperatorAnnotationPrefix + "image"

// checkPodPrefix starts each image check pod's name.
const checkPodPrefix = "nvidia-driver-image-check-"

// CheckPodName is the name of an image's check pod: one per image.
func CheckPodName(image string) string {
	sum := sha256.Sum256([]byte(image))
	return checkPodPrefix + hex.EncodeToString(sum[:6])
}

// CheckPod is the pod that pulls image on node and exits at once. It runs
// unprivileged as nobody, within small requests and limits (the image is
// not trusted yet: its "true" may be anything, and gets a few millicores
// and megabytes), and is owned by the policy: deleting the policy deletes
// it. It tolerates CheckTolerations: a cordoned or tainted GPU node still
// pulls, a quarantined one does not.
func CheckPod(cp *gpuv1.ClusterPolicy, namespace, image, node string, pullSecrets []string) *corev1.Pod {
	meta := render.ObjectMeta(cp, CheckPodName(image), namespace, string(CheckState))
	meta.Annotations = map[string]string{AnnotationImage: image}
	pod := &corev1.Pod{ObjectMeta: meta, Spec: corev1.PodSpec{
		NodeName:                     node,
		RestartPolicy:                corev1.RestartPolicyNever,
		AutomountServiceAccountToken: ptr.To(false),
		Tolerations:                  CheckTolerations(cp),
		SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65534),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
		Containers: []corev1.Container{{
			Name:            "pull",
			Image:           image,
			ImagePullPolicy: corev1.PullIfNotPresent,
			// Every driver image is a distribution's userland, with
			// true in it: exiting is all the check asks.
			Command: []string{"true"},
			SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false),
				Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
			Resources: checkResources,
		}},
	}}
	for _, s := range pullSecrets {
		pod.Spec.ImagePullSecrets = append(pod.Spec.ImagePullSecrets, corev1.LocalObjectReference{Name: s})
	}
	return pod
}

// checkResources bound the check's container: the pull is the kubelet's
// and counts against no container, and "true" needs about a millisecond of
// CPU and a megabyte. It requests nothing, explicitly (requests left unset
// would default to the limits): the pod is bound to its node, and a node
// whose requests are full would refuse even a few millicores, holding its
// pool's precompiled driver back.
var checkResources = corev1.ResourceRequirements{
	Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0"), corev1.ResourceMemory: resource.MustParse("0")},
	Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
}

// CheckTolerations are the check pod's: every NoSchedule and
// PreferNoSchedule taint (a cordoned node, or one the operator holds for
// maintenance, still pulls), and of NoExecute taints only those the
// policy's daemonsets.tolerations let operands run under. A NoExecute
// taint is a quarantine: an image not yet trusted does not run there.
func CheckTolerations(cp *gpuv1.ClusterPolicy) []corev1.Toleration {
	return append([]corev1.Toleration{
		{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectPreferNoSchedule},
	}, render.NoExecuteTolerations(cp)...)
}

// CheckMayRunOn reports whether a check pod with these tolerations would
// stay on node: it carries no NoExecute taint they do not tolerate.
func CheckMayRunOn(n *corev1.Node, tolerations []corev1.Toleration) bool {
	for i := range n.Spec.Taints {
		taint := &n.Spec.Taints[i]
		if taint.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		if !slices.ContainsFunc(tolerations, func(t corev1.Toleration) bool {
			return t.ToleratesTaint(klog.Background(), taint, false)
		}) {
			return false
		}
	}
	return true
}

// pullFailures are the reasons a kubelet gives a container whose image it
// cannot pull.
var pullFailures = []string{"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull", "RegistryUnavailable"}

// Verdict reads a check pod: the image is there once the kubelet pulled
// it (an image ID, whatever the container did next), missing while the
// kubelet cannot pull it, and being checked otherwise. A pod that ended
// without a pull checked nothing (the kubelet refused it, or its node
// went and the pod garbage collector failed it): retry says to start it
// again.
func Verdict(p *operandpods.Pod) (v ImageVerdict, retry bool) {
	if p.Pulled {
		return ImageVerdict{State: ImageAvailable}, false
	}
	if p.Phase == corev1.PodSucceeded || p.Phase == corev1.PodFailed {
		return ImageVerdict{State: ImageChecking}, true
	}
	for _, w := range p.Waiting {
		if slices.Contains(pullFailures, w.Reason) {
			msg := w.Reason
			if w.Message != "" {
				msg = fmt.Sprintf("%s: %s", w.Reason, w.Message)
			}
			return ImageVerdict{State: ImageMissing, Message: msg}, false
		}
	}
	return ImageVerdict{State: ImageChecking}, false
}

// CheckPods lists the image check pods; the operand pods index is one.
type CheckPods interface {
	OfState(state.Name) ([]*operandpods.Pod, error)
}

// verdicts reads every check pod not being deleted, by image.
func verdicts(checks CheckPods) (map[string]ImageVerdict, error) {
	pods, err := checks.OfState(CheckState)
	if err != nil {
		return nil, fmt.Errorf("reading the precompiled images' check pods: %w", err)
	}
	out := make(map[string]ImageVerdict, len(pods))
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		if image := p.Annotation(AnnotationImage); image != "" {
			out[image], _ = Verdict(p)
		}
	}
	return out, nil
}

// VerdictChanged passes the events of image check pods that can change
// what a pool decides: one created or deleted, or its verdict changed.
func VerdictChanged() predicate.Predicate {
	// The state and whether to retry: not the kubelet's message, which
	// alternates between ErrImagePull and ImagePullBackOff at every try.
	type outcome struct {
		state ImageState
		retry bool
	}
	verdict := func(o client.Object) (outcome, bool) {
		p, ok := o.(*operandpods.Pod)
		if !ok || p.State != CheckState {
			return outcome{}, false
		}
		v, retry := Verdict(p)
		return outcome{v.State, retry}, true
	}
	return predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool { _, ok := verdict(e.Object); return ok },
		DeleteFunc: func(e event.DeleteEvent) bool { _, ok := verdict(e.Object); return ok },
		UpdateFunc: func(e event.UpdateEvent) bool {
			before, ok := verdict(e.ObjectOld)
			after, _ := verdict(e.ObjectNew)
			return ok && before != after
		},
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}
