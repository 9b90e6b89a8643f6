package contract

import (
	"slices"
	"testing"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/nfd"
	"github.com/gpu-operator/gpu-operator/internal/state/registry"
	"github.com/gpu-operator/gpu-operator/internal/test/fixture"
)

// Where NFD's own chart grants its components their access, at v0.17.3.
const (
	nfdClusterRoles = "kubernetes-sigs/node-feature-discovery@v0.17.3:deployment/helm/node-feature-discovery/templates/clusterrole.yaml"
	nfdRoles        = "kubernetes-sigs/node-feature-discovery@v0.17.3:deployment/helm/node-feature-discovery/templates/role.yaml"
)

// grant is one verb on one resource, optionally on one named object.
type grant struct{ group, resource, verb, name string }

func grants(rules []rbacv1.PolicyRule) map[grant]bool {
	out := map[grant]bool{}
	for _, r := range rules {
		names := r.ResourceNames
		if len(names) == 0 {
			names = []string{""}
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					for _, n := range names {
						out[grant{g, res, v, n}] = true
					}
				}
			}
		}
	}
	return out
}

// covers reports whether have allows g: a grant on every name covers a
// grant on one.
func covers(have map[grant]bool, g grant) bool {
	return have[g] || have[grant{g.group, g.resource, g.verb, ""}]
}

// upstreamNFDAccess is NFD's chart's grants per component (cluster-wide and
// in its namespace together), less what our deployment of it does not use:
//   - nfd-master's namespaces list/watch: nfd-master v0.17.3 lists
//     namespaces only for restrictions.nodeFeatureNamespaceSelector
//     (pkg/nfd-master/nfd-api-controller.go:75-81), which we do not set;
//   - nfd-master's get and list on nodes/status: it only patches and
//     updates the subresource (pkg/nfd-master/nfd-master.go:1456);
//   - nfd-gc's nodes/proxy get: nfd-gc v0.17.3 only watches nodes' metadata
//     (pkg/nfd-gc/nfd-gc.go:217-220).
var upstreamNFDAccess = map[string][]rbacv1.PolicyRule{
	nfd.MasterName: {
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "patch", "update", "list"}},
		{APIGroups: []string{""}, Resources: []string{"nodes/status"}, Verbs: []string{"patch", "update"}},
		{APIGroups: []string{"nfd.k8s-sigs.io"}, Resources: []string{"nodefeatures", "nodefeaturerules", "nodefeaturegroups"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"nfd.k8s-sigs.io"}, Resources: []string{"nodefeaturegroups/status"}, Verbs: []string{"patch", "update"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{"nfd-master.nfd.kubernetes.io"}, Verbs: []string{"get", "update"}},
	},
	nfd.WorkerName: {
		{APIGroups: []string{"nfd.k8s-sigs.io"}, Resources: []string{"nodefeatures"}, Verbs: []string{"create", "get", "update", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}},
	},
	nfd.GCName: {
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{"topology.node.k8s.io"}, Resources: []string{"noderesourcetopologies"}, Verbs: []string{"delete", "list"}},
		{APIGroups: []string{"nfd.k8s-sigs.io"}, Resources: []string{"nodefeatures"}, Verbs: []string{"delete", "list"}},
	},
}

// Each NFD component gets what NFD's own chart grants it and nothing more:
// the cluster-wide rules the install ships plus the Role the operator
// renders in its namespace.
func TestNFDAccessContract(t *testing.T) {
	g := NewWithT(t)
	graph, err := registry.Graph()
	g.Expect(err).NotTo(HaveOccurred())
	s, _ := graph.Get(state.NodeFeatureDiscovery)
	objs, err := s.Operand.Render(state.RenderInput{Policy: policies(t)["default"], Namespace: fixture.Namespace})
	g.Expect(err).NotTo(HaveOccurred())

	ours := map[string][]rbacv1.PolicyRule{}
	for c, rules := range nfd.ClusterRules() {
		ours[c] = slices.Clone(rules)
	}
	for _, o := range objs {
		switch r := o.(type) {
		case *rbacv1.Role:
			ours[r.Name] = append(ours[r.Name], r.Rules...)
		case *rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding:
			t.Errorf("the operator renders %T %s: cluster-wide RBAC is the install's to ship", o, o.GetName())
		}
	}
	for component, upstream := range upstreamNFDAccess {
		have, want := grants(ours[component]), grants(upstream)
		for w := range want {
			g.Expect(covers(have, w)).To(BeTrue(), "%s needs %+v (%s, %s)", component, w, nfdClusterRoles, nfdRoles)
		}
		for h := range have {
			g.Expect(covers(want, h)).To(BeTrue(), "%s is granted %+v, which NFD's chart does not grant (%s, %s)", component, h, nfdClusterRoles, nfdRoles)
		}
	}
}
