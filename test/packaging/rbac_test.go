package packaging

import (
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

func rulesOf(g Gomega, objs []*unstructured.Unstructured, kind, name string) []rbacv1.PolicyRule {
	o := find(objs, kind, name)
	g.Expect(o).NotTo(BeNil(), "%s %s", kind, name)
	role := &rbacv1.ClusterRole{} // a Role decodes the same way
	g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, role)).To(Succeed())
	return role.Rules
}

// verbsOn lists the verbs rules grant on a resource, and whether each is
// limited to named objects.
func verbsOn(rules []rbacv1.PolicyRule, group, resource string) (unscoped, scoped []string) {
	for _, r := range rules {
		if !slices.Contains(r.APIGroups, group) || !slices.Contains(r.Resources, resource) {
			continue
		}
		if len(r.ResourceNames) == 0 {
			unscoped = append(unscoped, r.Verbs...)
		} else {
			scoped = append(scoped, r.Verbs...)
		}
	}
	return unscoped, scoped
}

// The grants the review found too wide stay narrow (issue 13, item 6).
func TestRBACScopedWrites(t *testing.T) {
	g := NewWithT(t)
	objs := template(t, "-f", fullValues)

	operator := rulesOf(g, objs, "ClusterRole", "gpu-operator")
	// The install ships the operands' ClusterRoles; the operator binds
	// each while its operand runs (issue 56): bind on those roles by name,
	// and no write of any ClusterRole.
	unscoped, scoped := verbsOn(operator, "rbac.authorization.k8s.io", "clusterroles")
	g.Expect(unscoped).To(BeEmpty(), "the operator writes or binds no ClusterRole but the operands'")
	g.Expect(scoped).To(Equal([]string{"bind"}))
	var operandRoles, bindable []string
	for _, o := range objs {
		if o.GetKind() == "ClusterRole" && o.GetLabels()["app.kubernetes.io/component"] != "" &&
			strings.HasPrefix(o.GetName(), "gpu-operator:") {
			operandRoles = append(operandRoles, o.GetName())
		}
	}
	for _, r := range operator {
		if slices.Contains(r.Verbs, "bind") {
			bindable = append(bindable, r.ResourceNames...)
		}
	}
	g.Expect(bindable).To(ConsistOf(operandRoles), "bind names the operands' ClusterRoles the chart ships, after the release's namespace")
	g.Expect(len(operandRoles)).To(BeNumerically(">=", 6))
	for _, o := range objs {
		if o.GetKind() == "ClusterRoleBinding" {
			role, _, _ := unstructured.NestedString(o.Object, "roleRef", "name")
			g.Expect(operandRoles).NotTo(ContainElement(role), "the chart binds no operand's ClusterRole: %s", o.GetName())
		}
	}
	for _, res := range []string{"nodefeaturerules", "nodefeaturegroups", "nodefeaturegroups/status", "nodefeatures"} {
		unscoped, _ := verbsOn(operator, "nfd.k8s-sigs.io", res)
		g.Expect(unscoped).To(BeEmpty(), "the operator holds no cluster-wide %s access", res)
	}
	unscoped, _ = verbsOn(operator, "", "nodes")
	g.Expect(unscoped).NotTo(ContainElement("update"), "node labels are patched, never updated")

	// Every write is a server-side apply or a merge patch: update is held
	// only where it is granted on (leases, NodeFeatures) or required (a
	// finalizers subresource for owner references that block deletion).
	// The DRA driver's Roles grant update on its MPS and IMEX workloads
	// and on ComputeDomainCliques, which the operator must hold to grant.
	updatable := []string{"leases", "nodefeatures", "clusterpolicies/finalizers", "daemonsets", "deployments", "computedomaincliques"}
	for _, kind := range []string{"ClusterRole", "Role"} {
		for _, r := range rulesOf(g, objs, kind, "gpu-operator") {
			if slices.Contains(r.Verbs, "update") {
				g.Expect(updatable).To(ContainElements(r.Resources), "%s grants update on %v, which nothing calls", kind, r.Resources)
			}
		}
	}

	namespaced := rulesOf(g, objs, "Role", "gpu-operator")
	unscoped, _ = verbsOn(namespaced, "coordination.k8s.io", "leases")
	g.Expect(unscoped).To(ConsistOf("get", "create", "update"), "leader election and the Role nfd-master gets")

	setup := rulesOf(g, objs, "ClusterRole", "gpu-operator-setup")
	unscoped, scoped = verbsOn(setup, "apiextensions.k8s.io", "customresourcedefinitions")
	g.Expect(unscoped).To(ConsistOf("create"), "create cannot be scoped by name; nothing else may be unscoped")
	g.Expect(scoped).To(ConsistOf("get", "patch"))

	// The operands' cluster-wide roles come with the install, named after
	// the release namespace; the operator binds them (above).
	for _, c := range []string{"nfd-master", "nfd-gc", "nvidia-mig-manager", "nvidia-dra-driver-kubeletplugin",
		"nvidia-dra-driver-controller", "compute-domain-daemon-service-account"} {
		g.Expect(rulesOf(g, objs, "ClusterRole", "gpu-operator:"+c)).NotTo(BeEmpty())
	}
}
