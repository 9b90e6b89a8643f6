package contract

import (
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/nfd"
	"github.com/gpu-operator/gpu-operator/internal/state/registry"
	"github.com/gpu-operator/gpu-operator/internal/test/fixture"
)

// Where NFD's own chart grants its components their access, at v0.19.0:
// nfd-master's ClusterRole at lines 1-58, nfd-worker's (only with node
// owner references) at 60-77 and nfd-gc's at 133-163; nfd-worker's Role
// at role.yaml:1-25.
const (
	nfdClusterRoles = nfdRepo + "deployment/helm/node-feature-discovery/templates/clusterrole.yaml"
	nfdRoles        = nfdRepo + "deployment/helm/node-feature-discovery/templates/role.yaml"
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
//   - nfd-master's namespaces list/watch: nfd-master v0.19.0 lists
//     namespaces only for restrictions.nodeFeatureNamespaceSelector
//     (pkg/nfd-master/nfd-api-controller.go:164-178), which we do not set
//     (the labels test reads nfd-master.conf strictly: no other key);
//   - nfd-master's get and list on nodes/status: it only patches the
//     subresource (pkg/nfd-master/nfd-master.go:1230, 1581-1583);
//   - nfd-worker's ClusterRole, get on nodes: the chart ships it only when
//     the worker's owner references include the node
//     (pkg/nfd-worker/nfd-worker.go:408-423); ours keep the default, pod
//     and DaemonSet (cmd/nfd-worker/main.go:128, nfd-worker.go:367), which
//     TestNFDWorkerOwnersNeedNoNodeAccess holds.
//
// nfd-gc's chart no longer grants nodes/proxy get, which v0.17.3's did: it
// only watches nodes' metadata (pkg/nfd-gc/nfd-gc.go:82, 226).
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
	objs := renderNFD(t, g)

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

// nfd-worker reads its Node, for which the chart grants a ClusterRole, only
// to make the Node an owner of its NodeFeature: it must keep the default
// owners, its pod and DaemonSet, which its Role covers. Owners come from
// -owner-refs or the config's core.ownerRefs.
func TestNFDWorkerOwnersNeedNoNodeAccess(t *testing.T) {
	g := NewWithT(t)
	objs := renderNFD(t, g)
	seen := 0
	for _, o := range objs {
		switch w := o.(type) {
		case *appsv1.DaemonSet:
			for _, c := range w.Spec.Template.Spec.Containers {
				for _, a := range append(slices.Clone(c.Command[1:]), c.Args...) {
					name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
					g.Expect(name).NotTo(Equal("owner-refs"), "%s runs with %q (%s:134)", c.Name, a, nfdWorkerMain)
				}
				seen++
			}
		case *corev1.ConfigMap:
			data, ok := w.Data["nfd-worker.conf"]
			if !ok {
				continue
			}
			var conf struct {
				Core struct {
					OwnerRefs []string `json:"ownerRefs"`
				} `json:"core"`
			}
			g.Expect(yaml.Unmarshal([]byte(data), &conf)).To(Succeed())
			g.Expect(conf.Core.OwnerRefs).NotTo(ContainElement("node"), "nfd-worker.conf makes the Node an owner (%s:80-88, 367-370)", nfdWorker)
			seen++
		}
	}
	g.Expect(seen).To(Equal(2), "want the nfd-worker container and its config")
}

// renderNFD renders NFD's objects under the default policy.
func renderNFD(t *testing.T, g Gomega) []client.Object {
	t.Helper()
	graph, err := registry.Graph()
	g.Expect(err).NotTo(HaveOccurred())
	s, _ := graph.Get(state.NodeFeatureDiscovery)
	objs, err := s.Operand.Render(state.RenderInput{Policy: policies(t)["default"], Namespace: fixture.Namespace})
	g.Expect(err).NotTo(HaveOccurred())
	return objs
}
