package controllertest

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-operator/gpu-operator/internal/draslices"
)

// schedule does what the scheduler would for a pod the operator made
// unbound and pinned to a node (a CUDA workload pod on a DRA node): it
// binds the pod to a node its required affinity matches, whose taints
// (a cordon's included) it tolerates, and whose ResourceSlices name an untainted
// device of the class the pod's claim template asks for, and otherwise
// says why not in the pod's PodScheduled condition, as the scheduler
// does. It allocates no claim and counts no device in use: envtest runs
// no claim controller; the e2e cluster's real scheduler and
// kube-controller-manager do both.
func (s *Cluster) schedule(ctx context.Context, p *corev1.Pod, nodes []corev1.Node) error {
	if p.DeletionTimestamp != nil {
		return nil
	}
	node, why, err := s.place(ctx, p, nodes)
	if err != nil {
		return err
	}
	if why == "" {
		binding := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace},
			Target: corev1.ObjectReference{Kind: "Node", Name: node}}
		err := s.c.SubResource("binding").Create(ctx, p, binding)
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil
		}
		return err
	}
	cond := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: fmt.Sprintf("0/%d nodes are available: %s.", len(nodes), why)}
	i := slices.IndexFunc(p.Status.Conditions, func(c corev1.PodCondition) bool { return c.Type == corev1.PodScheduled })
	if i >= 0 && p.Status.Conditions[i].Message == cond.Message {
		return nil
	}
	cond.LastTransitionTime = metav1.Now()
	if i >= 0 {
		p.Status.Conditions[i] = cond
	} else {
		p.Status.Conditions = append(p.Status.Conditions, cond)
	}
	p.Status.Phase = corev1.PodPending
	err = s.c.Status().Update(ctx, p)
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// place finds a node for the pod among those its required node affinity
// matches, or says why there is none.
func (s *Cluster) place(ctx context.Context, p *corev1.Pod, nodes []corev1.Node) (node, why string, err error) {
	affinity := nodeaffinity.GetRequiredNodeAffinity(p)
	why = fmt.Sprintf("%d node(s) didn't match Pod's node affinity/selector", len(nodes))
	for i := range nodes {
		n := &nodes[i]
		if ok, err := affinity.Match(n); err != nil || !ok {
			continue
		}
		// The node lifecycle controller, which envtest does not run,
		// takes the not-ready taint the API server puts on a new node
		// off once it is Ready, and taints a cordoned node
		// unschedulable:NoSchedule.
		taints := n.Spec.Taints
		if slices.ContainsFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool {
			return c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
		}) {
			taints = slices.DeleteFunc(slices.Clone(taints), func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeNotReady })
		}
		if n.Spec.Unschedulable {
			taints = append(slices.Clone(taints), corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule})
		}
		if taint, found := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), taints, p.Spec.Tolerations,
			func(t *corev1.Taint) bool {
				return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
			}, false); found {
			why = fmt.Sprintf("1 node(s) had untolerated taint {%s: %s}", taint.Key, taint.Value)
			continue
		}
		if why, err = s.unfit(ctx, p, n.Name); err != nil || why == "" {
			return nodes[i].Name, why, err
		}
	}
	return "", why, nil
}

// classTypes are the device types the DRA driver's DeviceClasses select
// (internal/state/dradriver: gpuDeviceClasses).
var classTypes = map[string]string{"gpu.nvidia.com": draslices.TypeGPU, "mig.nvidia.com": draslices.TypeMIG,
	"vfio.gpu.nvidia.com": draslices.TypeVFIO}

// unfit says why the pod cannot go to node, "" when it can: each of its
// claims' templates must name a DeviceClass of the GPU driver whose type
// the node's slices offer on an untainted device.
func (s *Cluster) unfit(ctx context.Context, p *corev1.Pod, node string) (string, error) {
	have := &resourcev1.ResourceSliceList{}
	if err := s.c.List(ctx, have); err != nil {
		return "", err
	}
	types := map[string]bool{}
	for i := range have.Items {
		sl := draslices.Keep(&have.Items[i])
		if sl.Node != node || sl.Driver != draslices.GPUDriver {
			continue
		}
		for _, d := range sl.Devices {
			if !slices.ContainsFunc(d.Taints, draslices.Taint.Keeps) {
				types[d.Type] = true
			}
		}
	}
	for _, claim := range p.Spec.ResourceClaims {
		if claim.ResourceClaimTemplateName == nil {
			return "", fmt.Errorf("pod %s: claim %s names no template", p.Name, claim.Name)
		}
		t := &resourcev1.ResourceClaimTemplate{}
		if err := s.c.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: *claim.ResourceClaimTemplateName}, t); err != nil {
			if apierrors.IsNotFound(err) {
				return "waiting for resource claim template " + *claim.ResourceClaimTemplateName, nil
			}
			return "", err
		}
		for _, r := range t.Spec.Spec.Devices.Requests {
			if r.Exactly == nil {
				return "", fmt.Errorf("template %s: request %s is not exact", t.Name, r.Name)
			}
			if !types[classTypes[r.Exactly.DeviceClassName]] {
				return "1 cannot allocate all claims", nil
			}
		}
	}
	return "", nil
}
