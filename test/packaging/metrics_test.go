package packaging

import (
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

func operatorDeployment(g Gomega, objs []*unstructured.Unstructured) *appsv1.Deployment {
	d := &appsv1.Deployment{}
	g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(find(objs, "Deployment", "gpu-operator").Object, d)).To(Succeed())
	return d
}

func endpoint(g Gomega, objs []*unstructured.Unstructured) map[string]any {
	sm := find(objs, "ServiceMonitor", "gpu-operator")
	g.Expect(sm).NotTo(BeNil())
	eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	g.Expect(eps).To(HaveLen(1))
	return eps[0].(map[string]any)
}

// By default metrics are served over HTTPS to callers the API server
// authenticates and authorizes: the operator may create the reviews, the
// chart ships the reader role, and the ServiceMonitor sends a token.
func TestMetricsNeedAuthenticationByDefault(t *testing.T) {
	g := NewWithT(t)
	objs := template(t, "--set", "operator.metrics.serviceMonitor.enabled=true")
	c := operatorDeployment(g, objs).Spec.Template.Spec.Containers[0]
	g.Expect(c.Args).To(ContainElements("--metrics-bind-address=:8443", "--metrics-secure=true"))
	g.Expect(c.Args).NotTo(ContainElement(HavePrefix("--metrics-cert-dir")))

	operatorRole := &rbacv1.ClusterRole{}
	g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(find(objs, "ClusterRole", "gpu-operator").Object, operatorRole)).To(Succeed())
	g.Expect(operatorRole.Rules).To(ContainElements(
		rbacv1.PolicyRule{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
		rbacv1.PolicyRule{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
	))
	reader := &rbacv1.ClusterRole{}
	g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(find(objs, "ClusterRole", "gpu-operator-metrics-reader").Object, reader)).To(Succeed())
	g.Expect(reader.Rules).To(Equal([]rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}))

	ep := endpoint(g, objs)
	g.Expect(ep).To(HaveKeyWithValue("scheme", "https"))
	g.Expect(ep).To(HaveKeyWithValue("bearerTokenFile", "/var/run/secrets/kubernetes.io/serviceaccount/token"))
	g.Expect(ep).To(HaveKeyWithValue("tlsConfig", map[string]any{"insecureSkipVerify": true}))
}

// A certificate Secret is mounted for the operator and verified by the
// ServiceMonitor.
func TestMetricsCertificateSecret(t *testing.T) {
	g := NewWithT(t)
	objs := template(t, "--set", "operator.metrics.serviceMonitor.enabled=true", "--set", "operator.metrics.certSecret=metrics-tls")
	pod := operatorDeployment(g, objs).Spec.Template.Spec
	g.Expect(pod.Containers[0].Args).To(ContainElement("--metrics-cert-dir=/var/run/gpu-operator/metrics-certs"))
	g.Expect(pod.Containers[0].VolumeMounts).To(ContainElement(And(
		HaveField("MountPath", "/var/run/gpu-operator/metrics-certs"), HaveField("ReadOnly", true))))
	g.Expect(pod.Volumes).To(ContainElement(HaveField("Secret.SecretName", "metrics-tls")))
	g.Expect(endpoint(g, objs)).To(HaveKeyWithValue("tlsConfig", map[string]any{
		"serverName": "gpu-operator-metrics.gpu-operator.svc",
		"ca":         map[string]any{"secret": map[string]any{"name": "metrics-tls", "key": "ca.crt"}},
	}))
}

// The documented opt-out serves plain HTTP, with no reader role to bind.
func TestMetricsOptOut(t *testing.T) {
	g := NewWithT(t)
	objs := template(t, "--set", "operator.metrics.serviceMonitor.enabled=true", "--set", "operator.metrics.secure=false",
		"--set", "operator.metrics.certSecret=ignored")
	c := operatorDeployment(g, objs).Spec.Template.Spec.Containers[0]
	g.Expect(c.Args).To(ContainElement("--metrics-secure=false"))
	g.Expect(c.Args).NotTo(ContainElement(HavePrefix("--metrics-cert-dir")))
	g.Expect(find(objs, "ClusterRole", "gpu-operator-metrics-reader")).To(BeNil())
	g.Expect(endpoint(g, objs)).NotTo(HaveKey("scheme"))
}

// Values that cannot work fail the install with the fix in the message.
func TestMetricsValuesThatCannotWork(t *testing.T) {
	tests := map[string]struct {
		args []string
		want string
	}{
		"ServiceMonitor without its CRD": {[]string{"--set", "operator.metrics.serviceMonitor.enabled=true"},
			"install the Prometheus Operator's CRDs first"},
		"metrics on the probes' port": {[]string{"--set", "operator.metrics.port=8081"}, "collides with the operator's health probes"},
		"no replicas":                 {[]string{"--set", "operator.replicas=0"}, "replicas"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := helm(append([]string{"template", "gpu-operator", chartPath}, tt.args...)...)
			NewWithT(t).Expect(err).To(MatchError(ContainSubstring(tt.want)))
		})
	}
}

// With a standby replica, a PodDisruptionBudget keeps one through drains;
// a single replica gets none, which would block every drain of its node.
func TestOperatorReplicas(t *testing.T) {
	g := NewWithT(t)
	g.Expect(find(template(t), "PodDisruptionBudget", "gpu-operator")).To(BeNil())
	objs := template(t, "--set", "operator.replicas=2")
	g.Expect(*operatorDeployment(g, objs).Spec.Replicas).To(BeEquivalentTo(2))
	pdb := find(objs, "PodDisruptionBudget", "gpu-operator")
	g.Expect(pdb).NotTo(BeNil())
	g.Expect(pdb.Object).To(HaveKeyWithValue("spec", HaveKeyWithValue("minAvailable", BeEquivalentTo(1))))
}
