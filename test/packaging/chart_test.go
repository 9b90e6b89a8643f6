package packaging

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/operator"
	"github.com/gpu-operator/gpu-operator/internal/test/crdschema"
	"github.com/gpu-operator/gpu-operator/internal/timers"
)

var fullValues = filepath.Join("testdata", "values-full.yaml")

func TestLint(t *testing.T) {
	g := NewWithT(t)
	for _, args := range [][]string{{}, {"-f", fullValues}, {"-f", nvidiaValues}} {
		out, err := helm(append([]string{"lint", "--strict", chartPath}, args...)...)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out).To(ContainSubstring("0 chart(s) failed"))
		g.Expect(out).NotTo(ContainSubstring("[WARNING]"))
	}
}

// The documented install command and a values file that sets everything
// both render, with the objects a user expects.
func TestTemplate(t *testing.T) {
	tests := map[string]struct {
		args []string
		want map[string]int
	}{
		"documented command": {
			args: []string{"--set", "driver.enabled=true", "--set", "driver.version=535.154.05"},
			want: map[string]int{"ClusterPolicy": 1, "Deployment": 1, "ServiceAccount": 3, "ClusterRole": 10,
				"ClusterRoleBinding": 3, "Role": 2, "RoleBinding": 2, "Service": 1, "Job": 2, "ConfigMap": 1},
		},
		"default values": {
			want: map[string]int{"ClusterPolicy": 1, "Deployment": 1, "ServiceAccount": 3, "ClusterRole": 10,
				"ClusterRoleBinding": 3, "Role": 2, "RoleBinding": 2, "Service": 1, "Job": 2, "ConfigMap": 1},
		},
		"every value set": {
			args: []string{"-f", fullValues},
			want: map[string]int{"ClusterPolicy": 1, "Deployment": 1, "ServiceAccount": 3, "ClusterRole": 10,
				"ClusterRoleBinding": 3, "Role": 2, "RoleBinding": 2, "Service": 1, "Job": 2, "ConfigMap": 2, "ServiceMonitor": 1,
				"PodDisruptionBudget": 1}, // the second ConfigMap: dcgmExporter.config's metrics list
		},
		"no ClusterPolicy": {
			args: []string{"--set", "clusterPolicy.create=false"},
			want: map[string]int{"Deployment": 1, "ServiceAccount": 3, "ClusterRole": 10,
				"ClusterRoleBinding": 3, "Role": 2, "RoleBinding": 2, "Service": 1, "Job": 2, "ConfigMap": 1},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			objs := template(t, tt.args...)
			NewWithT(t).Expect(kinds(objs)).To(Equal(tt.want))
			t.Logf("objects by kind: %v", kinds(objs))
		})
	}
}

// The operator runs as non-root with a read-only root filesystem, no
// privilege escalation, no capabilities, RuntimeDefault seccomp, resource
// requests and limits, probes, leader election and its namespace.
func TestOperatorDeploymentSecurity(t *testing.T) {
	g := NewWithT(t)
	d := &appsv1.Deployment{}
	g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(
		find(template(t), "Deployment", "gpu-operator").Object, d)).To(Succeed())
	expectSecureOperator(g, d)
	g.Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal("ghcr.io/gpu-operator/gpu-operator:v" + version(t)))
}

// expectSecureOperator checks the operator pod the chart, kustomize and the
// bundle all install.
func expectSecureOperator(g Gomega, d *appsv1.Deployment) {
	pod := d.Spec.Template.Spec
	g.Expect(*pod.SecurityContext.RunAsNonRoot).To(BeTrue())
	g.Expect(string(pod.SecurityContext.SeccompProfile.Type)).To(Equal("RuntimeDefault"))
	g.Expect(pod.Containers).To(HaveLen(1))
	c := pod.Containers[0]
	g.Expect(*c.SecurityContext.AllowPrivilegeEscalation).To(BeFalse())
	g.Expect(*c.SecurityContext.ReadOnlyRootFilesystem).To(BeTrue())
	g.Expect(c.SecurityContext.Capabilities.Drop).To(ConsistOf(BeEquivalentTo("ALL")))
	g.Expect(c.SecurityContext.Privileged).To(BeNil())
	g.Expect(c.Resources.Requests).To(HaveKey(BeEquivalentTo("cpu")))
	g.Expect(c.Resources.Requests).To(HaveKey(BeEquivalentTo("memory")))
	g.Expect(c.Resources.Limits).To(HaveKey(BeEquivalentTo("memory")))
	g.Expect(c.LivenessProbe.HTTPGet.Path).To(Equal("/healthz"))
	g.Expect(c.ReadinessProbe.HTTPGet.Path).To(Equal("/readyz"))
	g.Expect(c.Args).To(ContainElement("--leader-elect"))
	g.Expect(c.Env).To(ContainElement(HaveField("Name", "OPERATOR_NAMESPACE")))
	// The heap's soft limit follows the container's memory limit.
	g.Expect(c.Env).To(ContainElement(And(HaveField("Name", "GOMEMLIMIT"),
		HaveField("ValueFrom.ResourceFieldRef.Resource", "limits.memory"))))
	// The kubelet must not kill the manager before it has ended its
	// reconciles and released its leader lease.
	g.Expect(pod.TerminationGracePeriodSeconds).NotTo(BeNil())
	g.Expect(time.Duration(*pod.TerminationGracePeriodSeconds) * time.Second).To(BeNumerically(">", operator.ShutdownTimeout+5*time.Second))
}

// forbidden are grants the operator must never have. bind is held only on
// named ClusterRoles (TestRBACScopedWrites says which: the operands').
func forbidden(scope string, r rbacv1.PolicyRule) string {
	for _, v := range r.Verbs {
		switch {
		case v == "*":
			return "a * verb"
		case v == "bind" && slices.Equal(r.Resources, []string{"clusterroles"}) && len(r.ResourceNames) > 0:
		case v == "escalate" || v == "bind" || v == "impersonate":
			return "the " + v + " verb"
		}
	}
	for _, res := range r.Resources {
		switch {
		case res == "*":
			return "a * resource"
		case scope == "ClusterRole" && res == "secrets":
			return "cluster-wide secrets"
		}
	}
	for _, g := range r.APIGroups {
		if g == "*" {
			return "a * API group"
		}
	}
	return ""
}

// The RBAC the chart grants holds none of the forbidden grants, for the
// operator and for its hooks.
func TestRBACIsLeastPrivilege(t *testing.T) {
	g := NewWithT(t)
	objs := template(t, "-f", fullValues)
	count := 0
	for _, o := range objs {
		if o.GetKind() != "ClusterRole" && o.GetKind() != "Role" {
			continue
		}
		role := &rbacv1.ClusterRole{}
		g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, role)).To(Succeed())
		for _, r := range role.Rules {
			count++
			g.Expect(forbidden(o.GetKind(), r)).To(BeEmpty(), "%s %s grants %v", o.GetKind(), o.GetName(), r)
		}
	}
	g.Expect(count).To(BeNumerically(">", 10))

	// The operator's rules, for the closing note and the reviewer.
	for _, kind := range []string{"ClusterRole", "Role"} {
		role := &rbacv1.ClusterRole{}
		g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(find(objs, kind, "gpu-operator").Object, role)).To(Succeed())
		var b strings.Builder
		for _, r := range role.Rules {
			b.WriteString("  " + strings.Join(r.APIGroups, ",") + " " + strings.Join(r.Resources, ",") + ": " + strings.Join(r.Verbs, ",") + "\n")
		}
		t.Logf("%s gpu-operator:\n%s", kind, b.String())
	}
}

// values.schema.json turns a wrong type or an unknown key into a clear
// error naming the value.
func TestValuesSchemaRejectsBadValues(t *testing.T) {
	tests := map[string]struct {
		args []string
		want []string
	}{
		"wrong type":           {[]string{"--set", "driver.enabled=maybe"}, []string{"driver.enabled", "boolean"}},
		"unknown key":          {[]string{"--set", "drivr.enabled=true"}, []string{"drivr"}},
		"unknown nested key":   {[]string{"--set", "driver.upgradePolicy.maxParalelUpgrades=2"}, []string{"maxParalelUpgrades"}},
		"unknown runtime":      {[]string{"--set", "operator.defaultRuntime=podman"}, []string{"operator.defaultRuntime", "containerd"}},
		"negative timeout":     {[]string{"--set", "driver.upgradePolicy.drain.timeoutSeconds=-1"}, []string{"timeoutSeconds", "minimum"}},
		"count as a word":      {[]string{"--set", "driver.upgradePolicy.maxParallelUpgrades=two"}, []string{"maxParallelUpgrades", "integer"}},
		"grace not a duration": {[]string{"--set", "operator.readyGracePeriod=30 seconds"}, []string{"readyGracePeriod", "pattern"}},
		"unknown timer":        {[]string{"--set", "operator.timers.health-setle=2s"}, []string{"health-setle"}},
		"timer not a duration": {[]string{"--set-string", "operator.timers.health-settle=2 seconds"}, []string{"health-settle", "pattern"}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := helm(append([]string{"template", "gpu-operator", chartPath}, tt.args...)...)
			g.Expect(err).To(HaveOccurred())
			for _, w := range tt.want {
				g.Expect(err.Error()).To(ContainSubstring(w))
			}
		})
	}
}

// The values' defaults are the CRD's: installing with no --set gives the
// same images, versions and upgrade policy as an empty ClusterPolicy.
func TestValuesDefaultsMatchTheCRD(t *testing.T) {
	g := NewWithT(t)
	rendered := &gpuv1.ClusterPolicy{}
	g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(
		find(template(t), "ClusterPolicy", "cluster-policy").Object, rendered)).To(Succeed())
	fromChart, err := crdschema.Defaulted(rendered)
	g.Expect(err).NotTo(HaveOccurred())
	fromCRD, err := crdschema.Defaulted(&gpuv1.ClusterPolicy{})
	g.Expect(err).NotTo(HaveOccurred())

	chart, crd := fromChart.Spec, fromCRD.Spec
	g.Expect(chart.Operator).To(Equal(crd.Operator))
	g.Expect(chart.Driver.Repository).To(Equal(crd.Driver.Repository))
	g.Expect(chart.Driver.Image).To(Equal(crd.Driver.Image))
	g.Expect(chart.Driver.Version).To(Equal(crd.Driver.Version))
	g.Expect(chart.Driver.UpgradePolicy).To(Equal(crd.Driver.UpgradePolicy))
	g.Expect(chart.Toolkit).To(Equal(crd.Toolkit))
	g.Expect(chart.GFD).To(Equal(crd.GFD))
	g.Expect(chart.NFD).To(Equal(crd.NFD))
	g.Expect(chart.DevicePlugin.ComponentSpec).To(Equal(crd.DevicePlugin.ComponentSpec))
	g.Expect(chart.DevicePlugin.Version).To(Equal(crd.DevicePlugin.Version))
	g.Expect(chart.DCGMExporter.Version).To(Equal(crd.DCGMExporter.Version))
	g.Expect(chart.Daemonsets.PriorityClassName).To(Equal(crd.Daemonsets.PriorityClassName))
	g.Expect(chart.Daemonsets.UpdateStrategy).To(Equal(crd.Daemonsets.UpdateStrategy))
}

// The driver's mirror settings in the values reach the ClusterPolicy: the
// template writes them only when set, and a dropped block would render
// cleanly.
func TestDriverMirrorValuesReachThePolicy(t *testing.T) {
	g := NewWithT(t)
	rendered := &gpuv1.ClusterPolicy{}
	g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(
		find(template(t, "-f", fullValues), "ClusterPolicy", "gpu-policy").Object, rendered)).To(Succeed())
	g.Expect(rendered.Spec.Driver.RepoConfig).To(Equal(&gpuv1.DriverRepoConfig{ConfigMapName: "mirror-repos"}))
	g.Expect(rendered.Spec.Driver.CertConfig).To(Equal(&gpuv1.DriverCertConfig{Name: "mirror-ca"}))
	g.Expect(rendered.Spec.Driver.RDMA.IsEnabled()).To(BeTrue())
	g.Expect(rendered.Spec.Driver.RDMA.HostMOFED()).To(BeTrue())

	defaults := &gpuv1.ClusterPolicy{}
	g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(
		find(template(t), "ClusterPolicy", "cluster-policy").Object, defaults)).To(Succeed())
	g.Expect(defaults.Spec.Driver.RepoConfig).To(BeNil())
	g.Expect(defaults.Spec.Driver.CertConfig).To(BeNil())
	g.Expect(defaults.Spec.Driver.RDMA).To(BeNil())
}

// operator.maintenance.maxUnavailableNVLinkDomains reaches the policy when
// set, and the policy has no cap when it is not.
func TestNVLinkDomainCapReachesThePolicy(t *testing.T) {
	g := NewWithT(t)
	rendered := &gpuv1.ClusterPolicy{}
	g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(find(template(t, "--set",
		"operator.maintenance.maxUnavailableNVLinkDomains=50%"), "ClusterPolicy", "cluster-policy").Object, rendered)).To(Succeed())
	g.Expect(rendered.Spec.Operator.Maintenance.MaxUnavailableNVLinkDomains).To(HaveValue(Equal(intstr.FromString("50%"))))
	defaults := &gpuv1.ClusterPolicy{}
	g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(
		find(template(t), "ClusterPolicy", "cluster-policy").Object, defaults)).To(Succeed())
	g.Expect(defaults.Spec.Operator.Maintenance.MaxUnavailableNVLinkDomains).To(BeNil())
}

// The chart's appVersion is the VERSION file's, and its CRDs are the
// generated ones, byte for byte.
func TestChartCarriesTheGeneratedSources(t *testing.T) {
	g := NewWithT(t)
	chartYAML, err := os.ReadFile(filepath.Join(chartPath, "Chart.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	meta := map[string]any{}
	g.Expect(yaml.Unmarshal(chartYAML, &meta)).To(Succeed())
	g.Expect(meta["appVersion"]).To(Equal(version(t)))
	g.Expect(meta["version"]).To(Equal(version(t)))

	// The chart's crds/, which helm installs whatever the values say and
	// never upgrades, holds only the operator's own CRDs: NFD's and the DRA
	// driver's ComputeDomain CRDs are applied by the setup hook, on install
	// and upgrade, where no other installer created them.
	copies := map[string][]string{
		"config/crd/bases": {"deployments/gpu-operator/crds", "internal/crds"},
		"config/crd/nfd":   {"internal/crds"},
		"config/crd/dra":   {"internal/crds"},
	}
	for _, other := range []string{"nfd.*", "resource.nvidia.com_*"} {
		inChart, err := filepath.Glob(filepath.Join(root, "deployments/gpu-operator/crds", other))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(inChart).To(BeEmpty())
	}
	for src, dirs := range copies {
		files, err := filepath.Glob(filepath.Join(root, src, "*.yaml"))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(files).NotTo(BeEmpty())
		for _, f := range files {
			want, err := os.ReadFile(f)
			g.Expect(err).NotTo(HaveOccurred())
			for _, copyDir := range dirs {
				got, err := os.ReadFile(filepath.Join(root, copyDir, filepath.Base(f)))
				g.Expect(err).NotTo(HaveOccurred(), "run make manifests")
				g.Expect(got).To(Equal(want), "%s/%s differs from %s: run make manifests", copyDir, filepath.Base(f), f)
			}
		}
	}
}

func version(t *testing.T) string {
	t.Helper()
	v, err := os.ReadFile(filepath.Join(root, "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(v))
}

// operator.timers names every timer flag of the operator but the grace
// period, which has its own value, and each reaches the operator's
// arguments as its flag.
func TestTimersValuesAreTheOperatorsFlags(t *testing.T) {
	g := NewWithT(t)
	raw, err := os.ReadFile(filepath.Join(chartPath, "values.schema.json"))
	g.Expect(err).NotTo(HaveOccurred())
	var schema struct {
		Properties struct {
			Operator struct {
				Properties struct {
					Timers struct {
						PropertyNames struct {
							Enum []string `json:"enum"`
						} `json:"propertyNames"`
					} `json:"timers"`
				} `json:"properties"`
			} `json:"operator"`
		} `json:"properties"`
	}
	g.Expect(json.Unmarshal(raw, &schema)).To(Succeed())
	var flags []string
	for _, arg := range timers.Defaults().Args() {
		name, _, _ := strings.Cut(strings.TrimPrefix(arg, "--"), "=")
		if name != "ready-grace-period" {
			flags = append(flags, name)
		}
	}
	g.Expect(schema.Properties.Operator.Properties.Timers.PropertyNames.Enum).To(ConsistOf(flags))

	d := &appsv1.Deployment{}
	g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(find(template(t, "--set", "operator.timers.health-settle=2s",
		"--set", "operator.timers.leader-elect-lease-duration=30s"), "Deployment", "gpu-operator").Object, d)).To(Succeed())
	g.Expect(d.Spec.Template.Spec.Containers[0].Args).To(ContainElements("--health-settle=2s", "--leader-elect-lease-duration=30s"))
}

// NVIDIA's values for the driver's probes, its Secret env, host networking
// and the exporter's settings reach the ClusterPolicy, where the operator
// acts on them (issue 50); unset, none is written, and the CRD's defaults
// apply.
func TestNVIDIAOperandValuesReachThePolicy(t *testing.T) {
	g := NewWithT(t)
	objs := template(t, "-f", fullValues)
	rendered := &gpuv1.ClusterPolicy{}
	g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(find(objs, "ClusterPolicy", "gpu-policy").Object, rendered)).To(Succeed())
	d, e := rendered.Spec.Driver, rendered.Spec.DCGMExporter
	g.Expect(d.StartupProbe).To(Equal(&gpuv1.ContainerProbeSpec{InitialDelaySeconds: 30, FailureThreshold: 240}))
	g.Expect(d.LivenessProbe).To(Equal(&gpuv1.ContainerProbeSpec{PeriodSeconds: 30, FailureThreshold: 4}))
	g.Expect(d.ReadinessProbe).To(BeNil())
	g.Expect(d.SecretEnv).To(Equal("driver-proxy"))
	g.Expect(d.UsesHostNetwork()).To(BeTrue())
	g.Expect(e.UsesHostNetwork()).To(BeTrue())
	g.Expect(e.Config.Named()).To(Equal("dcgm-metrics"))
	g.Expect(find(objs, "ConfigMap", "dcgm-metrics")).NotTo(BeNil(), "config.create makes the metrics list")
	g.Expect(e.Service.Type).To(Equal(corev1.ServiceTypeNodePort))
	g.Expect(*e.Service.InternalTrafficPolicy).To(Equal(corev1.ServiceInternalTrafficPolicyLocal))
	g.Expect(e.HostPID).To(HaveValue(BeTrue()))
	g.Expect(e.HPCJobMapping.Dir()).To(Equal("/var/run/slurm-jobs"))
	g.Expect(e.Annotations).To(HaveKeyWithValue("example.com/scrape", "yes"))
	g.Expect(e.ServiceMonitor.ScrapeTimeout).To(Equal("20s"))
	g.Expect(e.ServiceMonitor.HonorLabels).To(HaveValue(BeTrue()))
	g.Expect(e.ServiceMonitor.Relabelings).To(Equal([]gpuv1.RelabelConfig{{SourceLabels: []string{"__meta_kubernetes_pod_node_name"},
		TargetLabel: "node", Action: "replace"}}))

	defaults := &gpuv1.ClusterPolicy{}
	g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(find(template(t), "ClusterPolicy", "cluster-policy").Object, defaults)).
		To(Succeed())
	g.Expect(defaults.Spec.Driver.StartupProbe).To(BeNil())
	g.Expect(defaults.Spec.Driver.SecretEnv).To(BeEmpty())
	g.Expect(defaults.Spec.Driver.HostNetwork).To(BeNil())
	g.Expect(defaults.Spec.DCGMExporter.Config).To(BeNil())
	g.Expect(defaults.Spec.DCGMExporter.Service).To(BeNil())
	g.Expect(defaults.Spec.DCGMExporter.HPCJobMapping).To(BeNil())
	g.Expect(defaults.Spec.Daemonsets.PodSecurityContext).To(BeNil())
	g.Expect(defaults.Spec.DCGM.IsEnabled()).To(BeFalse(), "NVIDIA's chart default: off")

	// A release upgraded with --reuse-values from a chart without dcgm
	// values has none: the host engine stays off, not the CRD's default.
	reused := &gpuv1.ClusterPolicy{}
	g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(find(template(t, "--set", "dcgm=null"), "ClusterPolicy",
		"cluster-policy").Object, reused)).To(Succeed())
	g.Expect(reused.Spec.DCGM).NotTo(BeNil())
	g.Expect(reused.Spec.DCGM.IsEnabled()).To(BeFalse())
}
