package install

import (
	"context"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/crds"
)

// FieldOwner is the field manager of setup's writes.
const FieldOwner = "gpu-operator-setup"

// podSecurityLabels let the operands' privileged pods into the namespace.
var podSecurityLabels = map[string]string{
	"pod-security.kubernetes.io/enforce": "privileged",
	"pod-security.kubernetes.io/audit":   "privileged",
	"pod-security.kubernetes.io/warn":    "privileged",
}

// Setup applies every embedded CRD, waits until each is established, and
// labels the namespace for privileged pods.
func Setup(ctx context.Context, c client.Client, namespace string, timeout time.Duration) error {
	all, err := crds.All()
	if err != nil {
		return err
	}
	for _, crd := range all {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(crd)
		if err != nil {
			return err
		}
		delete(m, "status")
		u := &unstructured.Unstructured{Object: m}
		unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying CRD %s: %w", crd.Name, err)
		}
	}
	for _, crd := range all {
		if err := waitEstablished(ctx, c, crd.Name, timeout); err != nil {
			return err
		}
	}
	ns := corev1ac.Namespace(namespace).WithLabels(podSecurityLabels)
	if err := c.Apply(ctx, ns, client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("labelling namespace %s for privileged pods: %w", namespace, err)
	}
	return nil
}

func waitEstablished(ctx context.Context, c client.Client, name string, timeout time.Duration) error {
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		for _, cond := range crd.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for CRD %s to be established: %w", name, err)
	}
	return nil
}

// Cleanup deletes every ClusterPolicy and waits until they are gone, which
// is when the operator has removed its labels from every node and its
// objects. With deleteCRDs it then deletes the CRDs too, which deletes
// every custom resource of those kinds.
func Cleanup(ctx context.Context, c client.Client, deleteCRDs bool, timeout time.Duration) error {
	policies := &gpuv1.ClusterPolicyList{}
	if err := c.List(ctx, policies); err != nil && !noKind(err) {
		return fmt.Errorf("listing ClusterPolicies: %w", err)
	}
	for i := range policies.Items {
		if err := c.Delete(ctx, &policies.Items[i]); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting ClusterPolicy %s: %w", policies.Items[i].Name, err)
		}
	}
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		left := &gpuv1.ClusterPolicyList{}
		if err := c.List(ctx, left); err != nil {
			return noKind(err), client.IgnoreNotFound(err)
		}
		return len(left.Items) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the operator to clean up after its ClusterPolicies (is it running?): %w", err)
	}
	if !deleteCRDs {
		return nil
	}
	all, err := crds.All()
	if err != nil {
		return err
	}
	for _, crd := range all {
		if err := c.Delete(ctx, crd); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting CRD %s: %w", crd.Name, err)
		}
	}
	return nil
}

// noKind reports an error meaning the ClusterPolicy CRD is not installed.
func noKind(err error) bool { return meta.IsNoMatchError(err) || apierrors.IsNotFound(err) }
