package install

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computedomainv1beta1 "github.com/gpu-operator/gpu-operator/api/computedomain/v1beta1"
	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/crds"
)

// FieldOwner is the field manager of setup's writes.
const FieldOwner = "gpu-operator-setup"

// LabelInstalledBy marks the CRDs setup created, as opposed to ones another
// installer (NFD's own chart, the NFD Operator) created: only those are
// updated by later setups and deleted by cleanup.
const LabelInstalledBy = "app.kubernetes.io/managed-by"

// installedBy is LabelInstalledBy's value.
const installedBy = "gpu-operator"

// The Pod Security labels that let the operands' privileged pods into the
// namespace.
const (
	podSecurityEnforce    = "pod-security.kubernetes.io/enforce"
	podSecurityAudit      = "pod-security.kubernetes.io/audit"
	podSecurityWarn       = "pod-security.kubernetes.io/warn"
	podSecurityPrivileged = "privileged"
)

// sharedNamespaces are never labelled privileged: every pod in them would
// be allowed to run privileged.
var sharedNamespaces = map[string]bool{"default": true, "kube-system": true, "kube-public": true, "kube-node-lease": true}

// Options are what setup does besides applying the ClusterPolicy CRD.
type Options struct {
	Namespace string
	// NFDCRDs applies NFD's CRDs, for the NFD the operator deploys; those
	// another installer created are left as they are.
	NFDCRDs bool
	// PodSecurity labels the namespace to admit privileged pods.
	PodSecurity bool
	Timeout     time.Duration
}

// Report says what setup did, for the hook's log.
type Report struct {
	Applied, LeftAlone []string
	Labelled           bool
}

// Setup applies the operator's CRDs (ClusterPolicy, NVIDIADriver, GPUCluster), the DRA
// driver's ComputeDomain CRDs and, if asked, NFD's, waits until they are
// established, and, if asked, labels the namespace for privileged pods.
// Another installer's CRDs (NVIDIA's DRA driver chart, an NFD of its own)
// are left alone, and nothing another manager owns is forced.
func Setup(ctx context.Context, c client.Client, o Options) (Report, error) {
	var rep Report
	if o.PodSecurity && sharedNamespaces[o.Namespace] {
		return rep, sharedNamespaceError(o.Namespace)
	}
	all, err := crds.All()
	if err != nil {
		return rep, err
	}
	for _, crd := range all {
		own := crd.Spec.Group == gpuv1.GroupVersion.Group
		if !own && !o.NFDCRDs && crd.Spec.Group != computedomainv1beta1.GroupVersion.Group {
			continue
		}
		if !own {
			existing := &apiextensionsv1.CustomResourceDefinition{}
			err := c.Get(ctx, client.ObjectKey{Name: crd.Name}, existing)
			if client.IgnoreNotFound(err) != nil {
				return rep, fmt.Errorf("reading CRD %s: %w", crd.Name, err)
			}
			if err == nil && existing.Labels[LabelInstalledBy] != installedBy {
				rep.LeftAlone = append(rep.LeftAlone, crd.Name)
				continue
			}
		}
		if err := apply(ctx, c, crd, own); err != nil {
			return rep, err
		}
		rep.Applied = append(rep.Applied, crd.Name)
	}
	for _, name := range append(append([]string{}, rep.Applied...), rep.LeftAlone...) {
		if err := waitEstablished(ctx, c, name, o.Timeout); err != nil {
			return rep, err
		}
	}
	if o.PodSecurity {
		if err := LabelPodSecurity(ctx, c, c, o.Namespace, FieldOwner); err != nil {
			return rep, err
		}
		rep.Labelled = true
	}
	return rep, nil
}

// LabelPodSecurity labels the namespace to admit privileged pods, as the
// field manager owner: setup under the chart's psa.enabled, the operator
// under the ClusterPolicy's spec.psa.enabled. enforce, the label admission
// acts on, must be privileged; audit and warn are set where nobody set
// them (a cluster that warns of restricted pods keeps its warnings, and
// OpenShift's label syncer owns both). The namespace is read from live,
// a reader that never caches namespaces. A namespace every workload shares
// is refused.
func LabelPodSecurity(ctx context.Context, live client.Reader, c client.Client, namespace, owner string) error {
	if sharedNamespaces[namespace] {
		return sharedNamespaceError(namespace)
	}
	ns := &corev1.Namespace{}
	if err := live.Get(ctx, client.ObjectKey{Name: namespace}, ns); err != nil {
		return fmt.Errorf("reading namespace %s to label it for privileged pods: %w", namespace, err)
	}
	labels := map[string]string{podSecurityEnforce: podSecurityPrivileged}
	for _, key := range []string{podSecurityAudit, podSecurityWarn} {
		if v, set := ns.Labels[key]; !set || v == podSecurityPrivileged {
			labels[key] = podSecurityPrivileged
		}
	}
	if err := c.Apply(ctx, corev1ac.Namespace(namespace).WithLabels(labels), client.FieldOwner(owner)); err != nil {
		return fmt.Errorf("labelling namespace %s %s=%s (another manager set it to %q? set psa.enabled=false and label it yourself): %w",
			namespace, podSecurityEnforce, podSecurityPrivileged, ns.Labels[podSecurityEnforce], err)
	}
	return nil
}

func sharedNamespaceError(namespace string) error {
	return fmt.Errorf("refusing to label namespace %s privileged: every pod there could then run privileged; "+
		"install the chart into a namespace of its own (gpu-operator)", namespace)
}

// apply applies a CRD marked as setup's. Only the operator's own CRD is
// applied with force: helm's crds/ created it from the same chart.
func apply(ctx context.Context, c client.Client, crd *apiextensionsv1.CustomResourceDefinition, force bool) error {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(crd)
	if err != nil {
		return err
	}
	delete(m, "status")
	u := &unstructured.Unstructured{Object: m}
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	labels := u.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[LabelInstalledBy] = installedBy
	u.SetLabels(labels)
	opts := []client.ApplyOption{client.FieldOwner(FieldOwner)}
	if force {
		opts = append(opts, client.ForceOwnership)
	}
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), opts...); err != nil {
		return fmt.Errorf("applying CRD %s: %w", crd.Name, err)
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

// CleanupOptions are what cleanup does.
type CleanupOptions struct {
	// DeleteCRDs deletes the ClusterPolicy CRD, and NFD's CRDs where setup
	// created them, with every custom resource of their kinds; never the
	// DRA driver's (deleteCRDs).
	DeleteCRDs bool
	Timeout    time.Duration
	// Namespace and SkipIfExists name a ConfigMap whose existence means
	// cleanup was not started by helm uninstall: helm creates it only once
	// the cleanup hook has finished, while a plain kubectl apply of the
	// rendered chart (helm template, kustomize helmCharts) creates it
	// alongside. Empty skips the check.
	Namespace, SkipIfExists string
	// Recheck is how long to wait before looking for that ConfigMap a
	// second time, so that one created by the same apply a moment later
	// is seen.
	Recheck time.Duration
}

// Cleanup deletes every ClusterPolicy and waits until they are gone, which
// is when the operator has removed its labels from every node and its
// objects. It reports false, having deleted nothing, when it was not
// started by helm uninstall.
func Cleanup(ctx context.Context, c client.Client, o CleanupOptions) (bool, error) {
	if o.SkipIfExists != "" {
		for i := range 2 {
			if i > 0 {
				select {
				case <-ctx.Done():
					return false, ctx.Err()
				case <-time.After(o.Recheck):
				}
			}
			err := c.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: o.SkipIfExists}, &corev1.ConfigMap{})
			if err == nil {
				return false, nil
			}
			if !apierrors.IsNotFound(err) {
				return false, fmt.Errorf("looking for ConfigMap %s/%s: %w", o.Namespace, o.SkipIfExists, err)
			}
		}
	}
	policies := &gpuv1.ClusterPolicyList{}
	if err := c.List(ctx, policies); err != nil && !noKind(err) {
		return false, fmt.Errorf("listing ClusterPolicies: %w", err)
	}
	for i := range policies.Items {
		if err := c.Delete(ctx, &policies.Items[i]); client.IgnoreNotFound(err) != nil {
			return false, fmt.Errorf("deleting ClusterPolicy %s: %w", policies.Items[i].Name, err)
		}
	}
	err := wait.PollUntilContextTimeout(ctx, time.Second, o.Timeout, true, func(ctx context.Context) (bool, error) {
		left := &gpuv1.ClusterPolicyList{}
		if err := c.List(ctx, left); err != nil {
			return noKind(err), client.IgnoreNotFound(err)
		}
		return len(left.Items) == 0, nil
	})
	if err != nil {
		return false, fmt.Errorf("waiting for the operator to clean up after its ClusterPolicies (is it running?): %w", err)
	}
	if !o.DeleteCRDs {
		return true, nil
	}
	return true, deleteCRDs(ctx, c)
}

// deleteCRDs deletes the operator's CRDs and the NFD CRDs setup created;
// NFD CRDs another installer created stay, with their objects. The DRA
// driver's ComputeDomain CRDs always stay: their objects may be another
// DRA driver's (NVIDIA's chart installed after ours runs on our CRDs), and
// a ComputeDomain's finalizer, which only its controller removes, would
// hold the CRD's deletion for ever once the operator took the controller
// away.
func deleteCRDs(ctx context.Context, c client.Client) error {
	all, err := crds.All()
	if err != nil {
		return err
	}
	for _, crd := range all {
		if crd.Spec.Group == computedomainv1beta1.GroupVersion.Group {
			continue
		}
		if crd.Spec.Group != gpuv1.GroupVersion.Group {
			existing := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.Get(ctx, client.ObjectKey{Name: crd.Name}, existing); err != nil {
				if apierrors.IsNotFound(err) {
					continue
				}
				return fmt.Errorf("reading CRD %s: %w", crd.Name, err)
			}
			if existing.Labels[LabelInstalledBy] != installedBy {
				continue
			}
		}
		if err := c.Delete(ctx, crd); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting CRD %s: %w", crd.Name, err)
		}
	}
	return nil
}

// noKind reports an error meaning the ClusterPolicy CRD is not installed.
func noKind(err error) bool { return meta.IsNoMatchError(err) || apierrors.IsNotFound(err) }
