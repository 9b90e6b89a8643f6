package controllertest

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
)

// ResourceOne is a quantity of 1, as a GPU pod asks for.
var ResourceOne = resource.MustParse("1")

// FullUpgrade is the steps of an upgrade in which no GPU pod or job is in
// the way.
var FullUpgrade = []gpuv1.UpgradeState{
	gpuv1.UpgradeRequired, gpuv1.UpgradeCordonRequired, gpuv1.UpgradeWaitForJobs, gpuv1.UpgradePodDeletion,
	gpuv1.UpgradePodRestart, gpuv1.UpgradeValidation, gpuv1.UpgradeUncordon, gpuv1.UpgradeDone,
}

// NewVersion sets the policy's driver version.
func NewVersion(v gpuv1.DriverVersion) func(*gpuv1.ClusterPolicy) {
	return func(cp *gpuv1.ClusterPolicy) { cp.Spec.Driver.Version = v }
}

// EnsureNamespace creates a namespace unless it exists.
func (f *Fixture) EnsureNamespace(name string) {
	err := f.s.Client.Create(f.Ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		f.T.Fatal(err)
	}
}

// GPUPod creates a workload pod bound to a node, owned by a controller so
// that it may be evicted, and running.
func (f *Fixture) GPUPod(name, node string, mutate func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{}
	p.Name, p.Namespace = name, "workloads"
	p.Labels = map[string]string{"app": name}
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: name, UID: "0000", Controller: ptr.To(true)}}
	p.Spec.NodeName = node
	p.Spec.Containers = []corev1.Container{{Name: "main", Image: "cuda"}}
	mutate(p)
	if err := f.s.Client.Create(f.Ctx, p); err != nil {
		f.T.Fatal(err)
	}
	p.Status.Phase = corev1.PodRunning
	if err := f.s.Client.Status().Update(f.Ctx, p); err != nil {
		f.T.Fatal(err)
	}
	f.T.Cleanup(func() { _ = f.s.Client.Delete(context.Background(), p, client.GracePeriodSeconds(0)) })
	return p
}

// HeldGPUPod runs a GPU pod on a node, in Namespace workloads, under a
// PodDisruptionBudget that refuses every eviction of it. It returns the
// budget, which the test may delete to let the pod go.
func (f *Fixture) HeldGPUPod(name, node string) *policyv1.PodDisruptionBudget {
	f.EnsureNamespace("workloads")
	f.GPUPod(name, node, func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": ResourceOne}
	})
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "workloads"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}}}
	if err := f.s.Client.Create(f.Ctx, pdb); err != nil {
		f.T.Fatal(err)
	}
	f.T.Cleanup(func() { _ = f.s.Client.Delete(context.Background(), pdb) })
	return pdb
}
