package packaging

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// `kubectl apply -k config/default` installs the same operator as the
// chart: CRDs, RBAC, the namespace labelled for privileged pods, and the
// same secure Deployment; every object passes a server-side dry run.
func TestKustomizeInstall(t *testing.T) {
	g := NewWithT(t)
	out, err := exec.Command(filepath.Join(root, "bin", "kubectl"), "kustomize", filepath.Join(root, "config", "default")).Output()
	g.Expect(err).NotTo(HaveOccurred(), "kubectl kustomize config/default (run make tools)")
	objs := decode(t, string(out))
	g.Expect(kinds(objs)).To(Equal(map[string]int{
		// CRDs: the operator's three, NFD's three and the DRA driver's two.
		"Namespace": 1, "CustomResourceDefinition": 8, "ServiceAccount": 1, "Role": 1, "RoleBinding": 1, "Deployment": 1,
		// The operator's, the metrics reader, nfd-master's, nfd-gc's,
		// mig-manager's and the DRA driver's three (kubelet plugin,
		// compute-domain controller, IMEX daemons); the operator's own
		// binding, as the operator binds each operand's while it runs.
		"ClusterRole": 8, "ClusterRoleBinding": 1,
	}))
	// Every CRD the operator watches: one missing would keep it from
	// starting.
	own, err := filepath.Glob(filepath.Join(root, "config", "crd", "bases", "*.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(own).NotTo(BeEmpty())
	for _, f := range own {
		group, plural, _ := strings.Cut(strings.TrimSuffix(filepath.Base(f), ".yaml"), "_")
		g.Expect(find(objs, "CustomResourceDefinition", plural+"."+group)).NotTo(BeNil(), f)
	}
	ns := find(objs, "Namespace", "gpu-operator")
	g.Expect(ns.GetLabels()).To(HaveKeyWithValue("pod-security.kubernetes.io/enforce", "privileged"))

	d := &appsv1.Deployment{}
	g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(find(objs, "Deployment", "gpu-operator").Object, d)).To(Succeed())
	expectSecureOperator(g, d)
	g.Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal("ghcr.io/gpu-operator/gpu-operator:v" + version(t)))

	for _, o := range objs {
		err := k8sClient.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(o),
			client.DryRunAll, client.FieldOwner("kustomize-test"), client.ForceOwnership)
		g.Expect(err).NotTo(HaveOccurred(), "%s %s", o.GetKind(), o.GetName())
	}
}
