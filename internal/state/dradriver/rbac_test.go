package dradriver

import (
	"fmt"
	"slices"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// upstreamRBAC is NVIDIA's 0100-0300: ServiceAccounts, Roles, ClusterRoles
// and their bindings.
const upstreamRBAC = "testdata/dra-driver-rbac-v26.7.0.yaml"

// upstreamWhen says when NVIDIA renders each namespaced object of
// upstreamRBAC, by the guard on its file's first line.
var upstreamWhen = map[string]func(computeDomains, mps bool) bool{
	// 0100_kubeletplugin-service_account.yaml: always.
	"ServiceAccount/nvidia-dra-driver-kubeletplugin": always,
	// 0110_controller-rbac.yaml L1, 0120_compute-domain-daemon-rbac.yaml L1,
	// 0130_kubeletplugin-computedomain-role.yaml L1: compute domains.
	"ServiceAccount/nvidia-dra-driver-controller":          withComputeDomains,
	"Role/nvidia-dra-driver-controller":                    withComputeDomains,
	"RoleBinding/nvidia-dra-driver-controller":             withComputeDomains,
	"ServiceAccount/compute-domain-daemon-service-account": withComputeDomains,
	"Role/nvidia-dra-driver-kubeletplugin":                 withComputeDomains,
	"RoleBinding/nvidia-dra-driver-kubeletplugin":          withComputeDomains,
	// 0140_kubeletplugin-mps-role.yaml L1: the MPSSupport gate.
	"Role/nvidia-dra-driver-kubeletplugin-mps":        withMPS,
	"RoleBinding/nvidia-dra-driver-kubeletplugin-mps": withMPS,
	// 0150_kubeletplugin-driver-validation-role.yaml: always at NVIDIA,
	// for the kubelet plugin's driver-validation init container; ours
	// has none (rbac.go).
	"Role/nvidia-dra-driver-kubeletplugin-driver-validation":        never,
	"RoleBinding/nvidia-dra-driver-kubeletplugin-driver-validation": never,
}

func always(bool, bool) bool                         { return true }
func never(bool, bool) bool                          { return false }
func withComputeDomains(computeDomains, _ bool) bool { return computeDomains }
func withMPS(_, mps bool) bool                       { return mps }

// upstreamNamespaced returns NVIDIA's namespaced RBAC objects by kind and
// name, and fails on one upstreamWhen does not place.
func upstreamNamespaced(t *testing.T) map[string]client.Object {
	t.Helper()
	out := map[string]client.Object{}
	for _, o := range upstreamObjects(t, upstreamRBAC) {
		if o.GetNamespace() == "" {
			continue
		}
		if _, ok := upstreamWhen[kindName(o)]; !ok {
			t.Fatalf("%s: %s is not in upstreamWhen", upstreamRBAC, kindName(o))
		}
		out[kindName(o)] = o
	}
	return out
}

// podsInNamespace is where ours departs from NVIDIA on purpose (rbac.go):
// the pods rule of the ClusterRole NVIDIA binds each ServiceAccount to is
// granted in the driver's namespace instead, by a Role of the
// ServiceAccount's name, rendered whenever the ServiceAccount is.
var podsInNamespace = map[string]func(computeDomains, mps bool) bool{
	KubeletPluginServiceAccount:       always,
	ControllerName:                    withComputeDomains,
	ComputeDomainDaemonServiceAccount: withComputeDomains,
}

// upstreamPodsRules are, by ServiceAccount, the pods rules of the
// ClusterRoles NVIDIA binds them to.
func upstreamPodsRules(t *testing.T) map[string]rbacv1.PolicyRule {
	t.Helper()
	out := map[string]rbacv1.PolicyRule{}
	for sa, rules := range upstreamClusterRules(t) {
		for _, r := range rules {
			if slices.Contains(r.Resources, "pods") {
				out[sa] = r
			}
		}
	}
	return out
}

// access renders NVIDIA's namespaced objects under the same conditions,
// the same Role rules in the same order, and the same bindings (0100
// L1-8, 0110 L2-9 and L68-121, 0120 L2-9, 0130 L2-27, 0140 L2-33; 0150
// L1-28 departs), and, for the components that read pods, their
// ClusterRole's pods rule in a Role of their namespace; nothing else.
func TestAccessMatchesNVIDIA(t *testing.T) {
	upstream := upstreamNamespaced(t)
	pods := upstreamPodsRules(t)
	for _, cd := range []bool{false, true} {
		for _, mps := range []bool{false, true} {
			t.Run(fmt.Sprintf("computeDomains=%t,MPSSupport=%t", cd, mps), func(t *testing.T) {
				g := NewWithT(t)
				in, d := draInput(upstreamNamespace, cd, mps)
				var want, got []string
				for key, when := range upstreamWhen {
					if when(cd, mps) {
						want = append(want, key)
					}
				}
				expected := map[string]client.Object{}
				for k, o := range upstream {
					expected[k] = o.DeepCopyObject().(client.Object)
				}
				for sa, when := range podsInNamespace {
					if !when(cd, mps) {
						continue
					}
					role, binding := "Role/"+sa, "RoleBinding/"+sa
					if !slices.Contains(want, role) {
						// NVIDIA has no Role of this name here: ours alone.
						want = append(want, role, binding)
						expected[role] = &rbacv1.Role{}
						expected[binding] = &rbacv1.RoleBinding{Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa,
							Namespace: upstreamNamespace}}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: sa}}
					}
					r := expected[role].(*rbacv1.Role)
					r.Rules = append(r.Rules, pods[sa])
				}
				for _, o := range access(in, d) {
					got = append(got, kindName(o))
					g.Expect(o.GetNamespace()).To(Equal(upstreamNamespace), kindName(o))
					assertSameGrant(g, o, expected[kindName(o)])
				}
				slices.Sort(want)
				slices.Sort(got)
				g.Expect(got).To(Equal(want), "the objects NVIDIA renders (%s)", upstreamRBAC)
			})
		}
	}
}

// assertSameGrant compares what a rendered Role grants or a RoleBinding
// binds with NVIDIA's object of its kind and name.
func assertSameGrant(g Gomega, ours, theirs client.Object) {
	switch o := ours.(type) {
	case *rbacv1.Role:
		up, ok := theirs.(*rbacv1.Role)
		g.Expect(ok).To(BeTrue(), "NVIDIA has no Role %s", o.Name)
		g.Expect(o.Rules).To(Equal(up.Rules), "Role %s's rules (%s)", o.Name, upstreamRBAC)
	case *rbacv1.RoleBinding:
		up, ok := theirs.(*rbacv1.RoleBinding)
		g.Expect(ok).To(BeTrue(), "NVIDIA has no RoleBinding %s", o.Name)
		g.Expect(o.Subjects).To(Equal(up.Subjects), "RoleBinding %s's subjects (%s)", o.Name, upstreamRBAC)
		g.Expect(o.RoleRef).To(Equal(up.RoleRef), "RoleBinding %s's role (%s)", o.Name, upstreamRBAC)
	case *corev1.ServiceAccount:
		_, ok := theirs.(*corev1.ServiceAccount)
		g.Expect(ok).To(BeTrue(), "NVIDIA has no ServiceAccount %s", o.Name)
	default:
		g.Expect(ours).To(BeNil(), "access renders a %T", ours)
	}
}

// Without compute domains or MPS, the kubelet plugin needs in the
// namespace only what reads pods there: NVIDIA renders only its
// ServiceAccount (0100 L1-8), besides 0150's Role, which ours does not
// need, and grants pods in a ClusterRole.
func TestAccessWithoutComputeDomainsIsThePluginsPodsInTheNamespace(t *testing.T) {
	g := NewWithT(t)
	in, d := draInput(upstreamNamespace, false, false)
	var got []string
	for _, o := range access(in, d) {
		got = append(got, kindName(o))
	}
	g.Expect(got).To(ConsistOf("ServiceAccount/"+KubeletPluginServiceAccount, "Role/"+KubeletPluginServiceAccount,
		"RoleBinding/"+KubeletPluginServiceAccount))
}

// A RoleBinding to a ServiceAccount that is not there, or in another
// namespace, grants nothing the driver runs as.
func TestRoleBindingsBindRenderedServiceAccounts(t *testing.T) {
	g := NewWithT(t)
	in, d := draInput("other-namespace", true, true)
	objs := access(in, d)
	rendered := map[string]client.Object{}
	for _, o := range objs {
		rendered[kindName(o)] = o
	}
	bindings := 0
	for _, o := range objs {
		rb, ok := o.(*rbacv1.RoleBinding)
		if !ok {
			continue
		}
		bindings++
		g.Expect(rb.Subjects).NotTo(BeEmpty(), rb.Name)
		for _, s := range rb.Subjects {
			g.Expect(s.Kind).To(Equal(rbacv1.ServiceAccountKind), rb.Name)
			g.Expect(s.Namespace).To(Equal(rb.Namespace), rb.Name)
			sa, ok := rendered["ServiceAccount/"+s.Name]
			g.Expect(ok).To(BeTrue(), "%s binds ServiceAccount %s, which is not rendered", rb.Name, s.Name)
			g.Expect(sa.GetNamespace()).To(Equal(rb.Namespace), rb.Name)
		}
		role, ok := rendered["Role/"+rb.RoleRef.Name]
		g.Expect(ok).To(BeTrue(), "%s binds Role %s, which is not rendered", rb.Name, rb.RoleRef.Name)
		g.Expect(role.GetNamespace()).To(Equal(rb.Namespace), rb.Name)
	}
	g.Expect(bindings).To(Equal(4), "the plugin's, its -mps, the controller's and the IMEX daemons'")
}

// The IMEX daemons' pods are the controller's: their template names the
// ServiceAccount and leaves the token to it (dra-driver-nvidia-gpu
// 95932046, templates/compute-domain-daemon.tmpl.yaml L20), and the daemon
// calls the API server (cmd/compute-domain-daemon/main.go:228-236). The
// operator's own pods mount their tokens in their pod specs.
func TestComputeDomainDaemonServiceAccountMountsItsToken(t *testing.T) {
	g := NewWithT(t)
	in, d := draInput(upstreamNamespace, true, false)
	seen := 0
	for _, o := range access(in, d) {
		sa, ok := o.(*corev1.ServiceAccount)
		if !ok {
			continue
		}
		seen++
		mounts := sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken
		g.Expect(mounts).To(Equal(sa.Name == ComputeDomainDaemonServiceAccount), sa.Name)
	}
	g.Expect(seen).To(Equal(3))
}

// upstreamClusterRules are, by ServiceAccount, the rules of the
// ClusterRole NVIDIA binds it to: 0200 L6-50 (bound by 0300 L1-12), 0110
// L15-66 (bound by L96-107) and 0120 L14-46 (bound by L48-59).
func upstreamClusterRules(t *testing.T) map[string][]rbacv1.PolicyRule {
	t.Helper()
	g := NewWithT(t)
	roles := map[string][]rbacv1.PolicyRule{}
	var bindings []*rbacv1.ClusterRoleBinding
	for _, o := range upstreamObjects(t, upstreamRBAC) {
		switch r := o.(type) {
		case *rbacv1.ClusterRole:
			roles[r.Name] = r.Rules
		case *rbacv1.ClusterRoleBinding:
			bindings = append(bindings, r)
		}
	}
	out := map[string][]rbacv1.PolicyRule{}
	for _, b := range bindings {
		g.Expect(b.Subjects).To(HaveLen(1), b.Name)
		s := b.Subjects[0]
		g.Expect(s.Kind).To(Equal(rbacv1.ServiceAccountKind), b.Name)
		g.Expect(s.Namespace).To(Equal(upstreamNamespace), b.Name)
		rules, ok := roles[b.RoleRef.Name]
		g.Expect(ok).To(BeTrue(), "%s binds ClusterRole %s, which %s lacks", b.Name, b.RoleRef.Name, upstreamRBAC)
		out[s.Name] = rules
	}
	g.Expect(out).To(HaveLen(3))
	return out
}

// ClusterRules grants each ServiceAccount the ClusterRole NVIDIA binds it
// to, rule for rule and in order, but for the pods rule, which is granted
// in the driver's namespace (TestAccessMatchesNVIDIA): no token of the
// driver reads or patches a pod in another namespace.
func TestClusterRulesMatchNVIDIA(t *testing.T) {
	g := NewWithT(t)
	want := map[string][]rbacv1.PolicyRule{}
	for sa, rules := range upstreamClusterRules(t) {
		want[sa] = slices.DeleteFunc(slices.Clone(rules), func(r rbacv1.PolicyRule) bool { return slices.Contains(r.Resources, "pods") })
		g.Expect(want[sa]).To(HaveLen(len(rules)-1), "NVIDIA's ClusterRole of %s has one pods rule", sa)
	}
	g.Expect(ClusterRules()).To(Equal(want), upstreamRBAC)
	for sa, rules := range ClusterRules() {
		for _, r := range rules {
			g.Expect(r.Resources).NotTo(ContainElement("pods"), "%s reads pods cluster-wide", sa)
		}
	}
}

// The driver's cluster-wide rules reach its tokens through the operator's
// ClusterRoleBindings, rendered with the driver alone: none while no pool
// uses DRA, the kubelet plugin's only without compute domains, and none
// where the install binds them itself (OLM). Each binds a rendered
// ServiceAccount to the ClusterRole the install ships for it.
func TestClusterRolesBoundOnlyWhileTheDriverRuns(t *testing.T) {
	g := NewWithT(t)
	bindings := func(in state.RenderInput) map[string]*rbacv1.ClusterRoleBinding {
		objs, err := Operand{}.Render(in)
		g.Expect(err).NotTo(HaveOccurred())
		out := map[string]*rbacv1.ClusterRoleBinding{}
		rendered := map[string]bool{}
		for _, o := range objs {
			rendered[kindName(o)] = true
			if b, ok := o.(*rbacv1.ClusterRoleBinding); ok {
				g.Expect(b.Subjects).To(HaveLen(1), b.Name)
				out[b.Subjects[0].Name] = b
			}
		}
		for sa, b := range out {
			g.Expect(rendered["ServiceAccount/"+sa]).To(BeTrue(), "%s binds ServiceAccount %s, which is not rendered", b.Name, sa)
			g.Expect(b.Subjects[0].Namespace).To(Equal(in.Namespace))
			g.Expect(b.RoleRef).To(Equal(rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole",
				Name: render.OperandClusterRoleName(in.Namespace, sa)}))
			g.Expect(ClusterRules()).To(HaveKey(sa), "the install ships a ClusterRole for %s", sa)
			g.Expect(b.Namespace).To(BeEmpty())
			g.Expect(b.OwnerReferences).To(HaveLen(1), "the policy's: deleting it deletes the binding")
		}
		return out
	}
	in, _ := draInput("gpu-ops", true, false)
	in.BindsOperandClusterRoles = true
	g.Expect(bindings(in)).To(BeEmpty(), "no pool uses DRA: no binding")

	in.DRAInUse = true
	g.Expect(bindings(in)).To(HaveKey(KubeletPluginServiceAccount))
	g.Expect(bindings(in)).To(HaveLen(len(ClusterRules())), "every component with cluster-wide rules, compute domains on")

	off, _ := draInput("gpu-ops", false, false)
	off.BindsOperandClusterRoles, off.DRAInUse = true, true
	g.Expect(bindings(off)).To(ConsistOf(HaveField("Subjects", ConsistOf(HaveField("Name", KubeletPluginServiceAccount)))),
		"without compute domains, the plugin alone runs")

	in.BindsOperandClusterRoles = false
	g.Expect(bindings(in)).To(BeEmpty(), "OLM binds them itself")
}
