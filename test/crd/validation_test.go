package crd

import (
	"context"
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/pluginconfig"
)

// invalidCase is one way a user can get a ClusterPolicy wrong: a value set
// at a path of a valid policy, and what the API server's answer must say.
type invalidCase struct {
	path  []string // under spec
	value any
	// field is the path the error must name; wants are further fragments
	// saying what is accepted.
	field string
	wants []string
}

var digest64 = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func invalidCases() map[string]invalidCase {
	return map[string]invalidCase{
		"unknown runtime": {
			path: p("operator", "defaultRuntime"), value: "podman",
			field: "spec.operator.defaultRuntime", wants: []string{`"containerd", "crio", "docker"`},
		},
		"runtime class not a DNS name": {
			path: p("operator", "runtimeClass"), value: "Nvidia_RT",
			field: "spec.operator.runtimeClass", wants: []string{"DNS subdomain"},
		},
		"unknown update strategy": {
			path: p("daemonsets", "updateStrategy"), value: "Recreate",
			field: "spec.daemonsets.updateStrategy", wants: []string{`"RollingUpdate", "OnDelete"`},
		},
		"daemonset maxUnavailable over 100%": {
			path: p("daemonsets", "rollingUpdate", "maxUnavailable"), value: "150%",
			field: "spec.daemonsets.rollingUpdate.maxUnavailable", wants: []string{"1% to 100%"},
		},
		"daemonset maxUnavailable zero": {
			path: p("daemonsets", "rollingUpdate", "maxUnavailable"), value: int64(0),
			field: "spec.daemonsets.rollingUpdate.maxUnavailable", wants: []string{"at least 1"},
		},
		"daemonset maxUnavailable words": {
			path: p("daemonsets", "rollingUpdate", "maxUnavailable"), value: "one",
			field: "spec.daemonsets.rollingUpdate.maxUnavailable", wants: []string{"count of at least 1"},
		},
		"priority class with a space": {
			path: p("daemonsets", "priorityClassName"), value: "critical pods",
			field: "spec.daemonsets.priorityClassName", wants: []string{"DNS subdomain"},
		},
		"label key with a bang": {
			path: p("daemonsets", "labels"), value: map[string]any{"team!": "gpu"},
			field: "spec.daemonsets.labels", wants: []string{"label key"},
		},
		"label value with spaces": {
			path: p("daemonsets", "labels"), value: map[string]any{"team": "gpu infra"},
			field: "spec.daemonsets.labels", wants: []string{"label value"},
		},
		"annotation key with empty prefix": {
			path: p("daemonsets", "annotations"), value: map[string]any{"/note": "x"},
			field: "spec.daemonsets.annotations", wants: []string{"annotation key"},
		},
		"tolerations not a list": {
			path: p("daemonsets", "tolerations"), value: "all",
			field: "spec.daemonsets.tolerations", wants: []string{"array"},
		},
		"driver args without init": {
			path: p("driver", "args"), value: []any{"-m", "8"},
			field: "spec.driver.args", wants: []string{"whose first must be init", "[init, -m"},
		},
		"repo config not a DNS name": {
			path: p("driver", "repoConfig", "configMapName"), value: "Mirror Repos",
			field: "spec.driver.repoConfig.configMapName", wants: []string{"DNS subdomain"},
		},
		"cert config not a DNS name": {
			path: p("driver", "certConfig", "name"), value: "ca_bundle",
			field: "spec.driver.certConfig.name", wants: []string{"DNS subdomain"},
		},
		"driver version latest": {
			path: p("driver", "version"), value: "latest",
			field: "spec.driver.version", wants: []string{"such as 535.154.05"},
		},
		"driver version with OS suffix": {
			path: p("driver", "version"), value: "535.154.05-ubuntu22.04",
			field: "spec.driver.version", wants: []string{"without the OS suffix"},
		},
		"driver digest too short": {
			path: p("driver", "version"), value: "sha256:abc",
			field: "spec.driver.version", wants: []string{"sha256:<64 lower case hex digits>"},
		},
		"driver version empty while enabled": {
			path: p("driver", "version"), value: "",
			field: "spec.driver", wants: []string{"image and version must be set while enabled is true"},
		},
		"driver image with a tag": {
			path: p("driver", "image"), value: "driver:535",
			field: "spec.driver.image", wants: []string{"without a tag or digest"},
		},
		"driver repository with a scheme": {
			path: p("driver", "repository"), value: "https://nvcr.io/nvidia",
			field: "spec.driver.repository", wants: []string{"such as nvcr.io/nvidia"},
		},
		"unknown pull policy": {
			path: p("driver", "imagePullPolicy"), value: "Sometimes",
			field: "spec.driver.imagePullPolicy", wants: []string{`"Always", "IfNotPresent", "Never"`},
		},
		"pull secret not a DNS name": {
			path: p("driver", "imagePullSecrets"), value: []any{"My_Secret"},
			field: "spec.driver.imagePullSecrets[0]", wants: []string{"DNS subdomain"},
		},
		"env name starting with a digit": {
			path: p("driver", "env"), value: []any{map[string]any{"name": "1GPU", "value": "x"}},
			field: "spec.driver.env[0].name", wants: []string{"must not start with a digit"},
		},
		"env name missing": {
			path: p("driver", "env"), value: []any{map[string]any{"value": "x"}},
			field: "spec.driver.env[0].name", wants: []string{"Required value"},
		},
		"env name twice": {
			path: p("driver", "env"), value: []any{
				map[string]any{"name": "A", "value": "1"}, map[string]any{"name": "A", "value": "2"},
			},
			field: "spec.driver.env[1]", wants: []string{"Duplicate value"},
		},
		"request above limit": {
			path: p("driver", "resources"), value: map[string]any{
				"requests": map[string]any{"memory": "2Gi"}, "limits": map[string]any{"memory": "1Gi"},
			},
			field: "spec.driver.resources", wants: []string{"less than or equal to the limit"},
		},
		"negative parallel upgrades": {
			path: p("driver", "upgradePolicy", "maxParallelUpgrades"), value: int64(-1),
			field: "spec.driver.upgradePolicy.maxParallelUpgrades", wants: []string{"greater than or equal to 0"},
		},
		"upgrade maxUnavailable 0%": {
			path: p("driver", "upgradePolicy", "maxUnavailable"), value: "0%",
			field: "spec.driver.upgradePolicy.maxUnavailable", wants: []string{"set autoUpgrade to false"},
		},
		"upgrade maxUnavailable 101%": {
			path: p("driver", "upgradePolicy", "maxUnavailable"), value: "101%",
			field: "spec.driver.upgradePolicy.maxUnavailable", wants: []string{"1% to 100%"},
		},
		"upgrade maxUnavailable negative": {
			path: p("driver", "upgradePolicy", "maxUnavailable"), value: int64(-2),
			field: "spec.driver.upgradePolicy.maxUnavailable", wants: []string{"at least 1"},
		},
		"remediation maxParallel 0%": {
			path: p("operator", "remediation", "maxParallel"), value: "0%",
			field: "spec.operator.remediation.maxParallel", wants: []string{"set enabled to false"},
		},
		"remediation maxParallel zero": {
			path: p("operator", "remediation", "maxParallel"), value: int64(0),
			field: "spec.operator.remediation.maxParallel", wants: []string{"at least 1"},
		},
		"remediation maxParallel words": {
			path: p("operator", "remediation", "maxParallel"), value: "all",
			field: "spec.operator.remediation.maxParallel", wants: []string{"1% to 100%"},
		},
		"NVLink domain cap zero": {
			path: p("operator", "maintenance", "maxUnavailableNVLinkDomains"), value: int64(0),
			field: "spec.operator.maintenance.maxUnavailableNVLinkDomains", wants: []string{"at least 1", "unset for no cap"},
		},
		"NVLink domain cap in words": {
			path: p("operator", "maintenance", "maxUnavailableNVLinkDomains"), value: "one rack",
			field: "spec.operator.maintenance.maxUnavailableNVLinkDomains", wants: []string{"1% to 100%"},
		},
		"remediation eviction timeout too short": {
			path: p("operator", "remediation", "evictionTimeoutSeconds"), value: int64(0),
			field: "spec.operator.remediation.evictionTimeoutSeconds", wants: []string{"greater than or equal to 30"},
		},
		"remediation validation timeout too short": {
			path: p("operator", "remediation", "validationTimeoutSeconds"), value: int64(10),
			field: "spec.operator.remediation.validationTimeoutSeconds", wants: []string{"greater than or equal to 60"},
		},
		"negative wait timeout": {
			path: p("driver", "upgradePolicy", "waitForCompletion", "timeoutSeconds"), value: int64(-1),
			field: "spec.driver.upgradePolicy.waitForCompletion.timeoutSeconds", wants: []string{"greater than or equal to 0"},
		},
		"negative pod deletion timeout": {
			path: p("driver", "upgradePolicy", "podDeletion", "timeoutSeconds"), value: int64(-5),
			field: "spec.driver.upgradePolicy.podDeletion.timeoutSeconds", wants: []string{"greater than or equal to 0"},
		},
		"negative drain timeout": {
			path: p("driver", "upgradePolicy", "drain", "timeoutSeconds"), value: int64(-1),
			field: "spec.driver.upgradePolicy.drain.timeoutSeconds", wants: []string{"greater than or equal to 0"},
		},
		"autoUpgrade as a word": {
			path: p("driver", "upgradePolicy", "autoUpgrade"), value: "yes",
			field: "spec.driver.upgradePolicy.autoUpgrade", wants: []string{"boolean"},
		},
		"toolkit tag with a space": {
			path: p("toolkit", "version"), value: "v1 2",
			field: "spec.toolkit.version", wants: []string{"must be an image tag"},
		},
		"toolkit image empty while enabled": {
			path: p("toolkit", "image"), value: "",
			field: "spec.toolkit", wants: []string{"image and version must be set while enabled is true"},
		},
		"device plugin default config without a ConfigMap": {
			path: p("devicePlugin", "config"), value: map[string]any{"default": "a100"},
			field: "spec.devicePlugin.config", wants: []string{"name must be set"},
		},
		"driver startup probe with two successes": {
			path: p("driver", "startupProbe"), value: map[string]any{"successThreshold": int64(2)},
			field: "spec.driver.startupProbe", wants: []string{"startup probe's successThreshold must be 1"},
		},
		"driver liveness probe with two successes": {
			path: p("driver", "livenessProbe"), value: map[string]any{"successThreshold": int64(2)},
			field: "spec.driver.livenessProbe", wants: []string{"liveness probe's successThreshold must be 1"},
		},
		"driver probe period of zero seconds": {
			path: p("driver", "readinessProbe"), value: map[string]any{"periodSeconds": int64(-1)},
			field: "spec.driver.readinessProbe.periodSeconds", wants: []string{"greater than or equal to 1"},
		},
		"driver secretEnv not a name": {
			path: p("driver", "secretEnv"), value: "Proxy Creds",
			field: "spec.driver.secretEnv", wants: []string{"the name of a Secret"},
		},
		"exporter job mapping directory relative": {
			path: p("dcgmExporter", "hpcJobMapping"), value: map[string]any{"enabled": true, "directory": "var/jobs"},
			field: "spec.dcgmExporter.hpcJobMapping.directory", wants: []string{"absolute path"},
		},
		"exporter job mapping directory through '..'": {
			path: p("dcgmExporter", "hpcJobMapping"), value: map[string]any{"enabled": true, "directory": "/var/lib/../../etc"},
			field: "spec.dcgmExporter.hpcJobMapping.directory", wants: []string{"'..' segment"},
		},
		"exporter job mapping directory the host's root": {
			path: p("dcgmExporter", "hpcJobMapping"), value: map[string]any{"enabled": true, "directory": "//"},
			field: "spec.dcgmExporter.hpcJobMapping.directory", wants: []string{"must not be / alone"},
		},
		"kubelet root the host's root": {
			path: p("hostPaths", "kubeletRootDir"), value: "/",
			field: "spec.hostPaths.kubeletRootDir", wants: []string{"must not be / alone"},
		},
		"kubelet root through '..'": {
			path: p("hostPaths", "kubeletRootDir"), value: "/var/lib/kubelet/..",
			field: "spec.hostPaths.kubeletRootDir", wants: []string{"'..' segment"},
		},
		"root filesystem through '..'": {
			path: p("hostPaths", "rootFS"), value: "/../host",
			field: "spec.hostPaths.rootFS", wants: []string{"'..' segment"},
		},
		"host driver directory overlong": {
			path: p("hostPaths", "driverInstallDir"), value: "/" + strings.Repeat("d", 4096),
			field: "spec.hostPaths.driverInstallDir", wants: []string{"Too long"},
		},
		"toolkit installed into the host's root": {
			path: p("toolkit", "installDir"), value: "/",
			field: "spec.toolkit.installDir", wants: []string{"must not be / alone"},
		},
		"toolkit installed through '..'": {
			path: p("toolkit", "installDir"), value: "/usr/local/../../bin",
			field: "spec.toolkit.installDir", wants: []string{"'..' segment"},
		},
		"env with a value and valueFrom": {
			path: p("driver", "env"), value: []any{map[string]any{"name": "HTTPS_PROXY", "value": "http://proxy:3128",
				"valueFrom": map[string]any{"secretKeyRef": map[string]any{"name": "proxy", "key": "url"}}}},
			field: "spec.driver.env[0]", wants: []string{"set value or valueFrom, not both"},
		},
		"env from a Secret key with a slash": {
			path: p("driver", "env"), value: []any{map[string]any{"name": "HTTPS_PROXY",
				"valueFrom": map[string]any{"secretKeyRef": map[string]any{"name": "proxy", "key": "a/b"}}}},
			field: "spec.driver.env[0].valueFrom.secretKeyRef.key", wants: []string{"must be a Secret key"},
		},
		"toolkit's runtime config from a Secret": {
			path: p("toolkit", "env"), value: []any{map[string]any{"name": "CONTAINERD_CONFIG",
				"valueFrom": map[string]any{"secretKeyRef": map[string]any{"name": "paths", "key": "config"}}}},
			field: "spec.toolkit", wants: []string{"take a value, not valueFrom"},
		},
		"device list strategy from a Secret": {
			path: p("devicePlugin", "env"), value: []any{map[string]any{"name": "DEVICE_LIST_STRATEGY",
				"valueFrom": map[string]any{"secretKeyRef": map[string]any{"name": "plugin", "key": "strategy"}}}},
			field: "spec.devicePlugin", wants: []string{"DEVICE_LIST_STRATEGY takes a value"},
		},
		"driver manager setting from a Secret": {
			path: p("driver", "manager"), value: map[string]any{"env": []any{map[string]any{"name": "ENABLE_AUTO_DRAIN",
				"valueFrom": map[string]any{"secretKeyRef": map[string]any{"name": "manager", "key": "drain"}}}}},
			field: "spec.driver.manager.env", wants: []string{"takes values, not valueFrom"},
		},
		"GPUDirect Storage pinned by tag and digest": {
			path: p("gds"), value: map[string]any{"enabled": true, "version": "2.29.4@" + digest64},
			field: "spec.gds.version", wants: []string{"tagged per OS"},
		},
		"tag with a digest of upper case hex": {
			path: p("devicePlugin", "version"), value: "v0.20.0@sha256:" + strings.Repeat("A", 64),
			field: "spec.devicePlugin.version", wants: []string{"tag@sha256:<digest>"},
		},
		"exporter Service of an unknown type": {
			path: p("dcgmExporter", "service"), value: map[string]any{"type": "Ingress"},
			field: "spec.dcgmExporter.service.type", wants: []string{"ClusterIP", "NodePort", "LoadBalancer"},
		},
		"device plugin ConfigMap named as the operator's copy": {
			path: p("devicePlugin", "config"), value: map[string]any{"name": pluginconfig.ValidatedConfigMap},
			field: "spec.devicePlugin.config.name", wants: []string{"the operator's copy of the validated configurations"},
		},
		"device plugin ConfigMap name with a space": {
			path: p("devicePlugin", "config"), value: map[string]any{"name": "plugin config"},
			field: "spec.devicePlugin.config.name", wants: []string{"DNS subdomain"},
		},
		"scrape interval without a unit": {
			path: p("dcgmExporter", "serviceMonitor"), value: map[string]any{"enabled": true, "interval": "15"},
			field: "spec.dcgmExporter.serviceMonitor.interval", wants: []string{"such as 15s"},
		},
		"ServiceMonitor label value with a space": {
			path: p("dcgmExporter", "serviceMonitor"), value: map[string]any{"additionalLabels": map[string]any{"release": "kube prometheus"}},
			field: "spec.dcgmExporter.serviceMonitor.additionalLabels", wants: []string{"label value"},
		},
		"gfd enabled as a string": {
			path: p("gfd", "enabled"), value: "true",
			field: "spec.gfd.enabled", wants: []string{"boolean"},
		},
		"nfd tag starting with a dash": {
			path: p("nfd", "version"), value: "-v0.17",
			field: "spec.nfd.version", wants: []string{"not starting with '.' or '-'"},
		},
		"digest with upper case hex": {
			path: p("gfd", "version"), value: "sha256:" + "ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789",
			field: "spec.gfd.version", wants: []string{"lower case hex"},
		},
		"misspelt field": {
			path: p("driver", "verison"), value: "535.154.05",
			field: "spec.driver.verison", wants: []string{"unknown field"},
		},
		"overlapping driver pools": {
			path: p("driver", "nodePools"), value: []any{
				map[string]any{"name": "a100", "nodeSelector": map[string]any{"gpu": "a100"}, "version": "550.54.15"},
				map[string]any{"name": "zone-a", "nodeSelector": map[string]any{"zone": "a"}, "version": "535.154.05"},
			},
			field: "spec.driver.nodePools", wants: []string{"overlapping nodeSelectors", "require different values"},
		},
		"precompiled with a whole driver version": {
			path: p("driver", "usePrecompiled"), value: true,
			field: "spec.driver.version", wants: []string{"with usePrecompiled, version is a driver branch such as 580"},
		},
		"driver branch without precompiled": {
			path: p("driver", "version"), value: "580",
			field: "spec.driver.version", wants: []string{"a driver branch such as 580 names images only with usePrecompiled"},
		},
		"pool driver branch without precompiled": {
			path: p("driver", "nodePools"), value: []any{map[string]any{"name": "a100", "nodeSelector": map[string]any{"gpu": "a100"}, "version": "550"}},
			field: "spec.driver.nodePools", wants: []string{"a pool's version is a driver branch such as 580 with usePrecompiled"},
		},
		"pool selecting on GFD's product": {
			path: p("driver", "nodePools"), value: []any{map[string]any{"name": "h200", "nodeSelector": map[string]any{"nvidia.com/gpu.product": "NVIDIA-H200"}}},
			field: "spec.driver.nodePools[0].nodeSelector", wants: []string{"label the pool's nodes yourself"},
		},
		"pool device plugin config not a label value": {
			path: p("driver", "nodePools"), value: []any{map[string]any{"name": "h200", "nodeSelector": map[string]any{"gpu": "h200"},
				"devicePluginConfig": "time slicing"}},
			field: "spec.driver.nodePools[0].devicePluginConfig", wants: []string{"ConfigMap key that is also a label value"},
		},
		"a pool named default": {
			path: p("driver", "nodePools"), value: []any{map[string]any{"name": "default", "nodeSelector": map[string]any{"gpu": "a100"}}},
			field: "spec.driver.nodePools[0].name", wants: []string{"default names the pool of nodes matching no pool"},
		},
		"a pool selecting every node": {
			path: p("driver", "nodePools"), value: []any{map[string]any{"name": "all", "nodeSelector": map[string]any{}}},
			field: "spec.driver.nodePools[0].nodeSelector", wants: []string{"should have at least 1 properties"},
		},
		"drain selector that does not parse": {
			path: p("driver", "upgradePolicy", "drain", "podSelector"), value: "app=(training",
			field: "spec.driver.upgradePolicy.drain.podSelector", wants: []string{"must be a label selector"},
		},
		"pod deletion selector with a space in a value": {
			path: p("driver", "upgradePolicy", "podDeletion", "podSelector"), value: "app=my job",
			field: "spec.driver.upgradePolicy.podDeletion.podSelector", wants: []string{"must be a label selector"},
		},
		"wait selector with an empty set": {
			path: p("driver", "upgradePolicy", "waitForCompletion", "podSelector"), value: "app in ()",
			field: "spec.driver.upgradePolicy.waitForCompletion.podSelector", wants: []string{"must be a label selector"},
		},
		"toleration of every key with Equal": {
			path: p("daemonsets", "tolerations"), value: []any{map[string]any{"operator": "Equal", "value": "x"}},
			field: "spec.daemonsets.tolerations[0]", wants: []string{"operator must be Exists when key is empty"},
		},
		"toleration Exists with a value": {
			path: p("daemonsets", "tolerations"), value: []any{map[string]any{"key": "gpu", "operator": "Exists", "value": "x"}},
			field: "spec.daemonsets.tolerations[0]", wants: []string{"value must be empty when operator is Exists"},
		},
		"toleration seconds without NoExecute": {
			path: p("daemonsets", "tolerations"), value: []any{map[string]any{"key": "gpu", "effect": "NoSchedule", "tolerationSeconds": int64(60)}},
			field: "spec.daemonsets.tolerations[0]", wants: []string{"tolerationSeconds needs effect NoExecute"},
		},
		"toleration with an unknown effect": {
			path: p("daemonsets", "tolerations"), value: []any{map[string]any{"key": "gpu", "effect": "NoRun"}},
			field: "spec.daemonsets.tolerations[0].effect", wants: []string{`"NoSchedule", "PreferNoSchedule", "NoExecute"`},
		},
		"toleration key with a space": {
			path: p("daemonsets", "tolerations"), value: []any{map[string]any{"key": "my key", "operator": "Exists"}},
			field: "spec.daemonsets.tolerations[0].key", wants: []string{"must be a taint key"},
		},
		"resource name with a space": {
			path: p("devicePlugin", "resources"), value: map[string]any{"limits": map[string]any{"gpu memory": "1Gi"}},
			field: "spec.devicePlugin.resources.limits", wants: []string{"must be a resource name"},
		},
		"negative request": {
			path: p("devicePlugin", "resources"), value: map[string]any{"requests": map[string]any{"cpu": "-100m"}},
			field: "spec.devicePlugin.resources.requests", wants: []string{"must not be negative"},
		},
		"kernel module type unknown": {
			path: p("driver", "kernelModuleType"), value: "closed",
			field: "spec.driver.kernelModuleType", wants: []string{"auto", "open", "proprietary"},
		},
		"host root not absolute": {
			path: p("hostPaths", "rootFS"), value: "host",
			field: "spec.hostPaths.rootFS", wants: []string{"^/"},
		},
		"toolkit install dir not absolute": {
			path: p("toolkit", "installDir"), value: "nvidia",
			field: "spec.toolkit.installDir", wants: []string{"^/"},
		},
		"NRI plugin without CDI": {
			path: p("cdi"), value: map[string]any{"enabled": false, "nriPluginEnabled": true},
			field: "spec.cdi.nriPluginEnabled", wants: []string{"needs cdi.enabled=true"},
		},
		"driver manager boolean not a boolean": {
			path: p("driver", "manager"), value: map[string]any{"env": []any{map[string]any{"name": "ENABLE_AUTO_DRAIN", "value": "yes"}}},
			field: "spec.driver.manager", wants: []string{"ENABLE_AUTO_DRAIN", "take true or false"},
		},
		"driver manager drain timeout without a unit": {
			path: p("driver", "manager"), value: map[string]any{"env": []any{map[string]any{"name": "DRAIN_TIMEOUT_SECONDS", "value": "300"}}},
			field: "spec.driver.manager", wants: []string{"DRAIN_TIMEOUT_SECONDS takes a duration such as 300s"},
		},
		"env list too long": {
			path: p("devicePlugin", "env"), value: manyEnv(65),
			field: "spec.devicePlugin.env", wants: []string{"must have at most 64 items"},
		},
	}
}

// Every case is rejected, and the answer names the field and what it
// accepts. A digest that is right is accepted, so the table is not
// rejecting everything.
func TestInvalidPoliciesAreRejected(t *testing.T) {
	cases := invalidCases()
	if len(cases) < 25 {
		t.Fatalf("only %d invalid cases; the suite promises at least 25", len(cases))
	}
	i := 0
	for name, tc := range cases {
		i++
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			obj := validPolicy(fmt.Sprintf("invalid-%d", i))
			spec := obj.Object["spec"].(map[string]any)
			g.Expect(unstructured.SetNestedField(spec, tc.value, tc.path...)).To(Succeed())

			err := k8sClient.Create(context.Background(), obj)
			g.Expect(err).To(HaveOccurred(), "the API server accepted %s = %v", tc.field, tc.value)
			g.Expect(apierrors.IsInvalid(err) || apierrors.IsBadRequest(err)).To(BeTrue(), "unexpected error kind: %v", err)
			g.Expect(err.Error()).To(ContainSubstring(tc.field))
			for _, want := range tc.wants {
				g.Expect(err.Error()).To(ContainSubstring(want))
			}
			t.Logf("rejected: %v", err)
		})
	}
	t.Logf("%d invalid ClusterPolicies rejected", len(cases))
}

// The NRI plugin is the operator's toolkit's: a policy that turns it on
// with the toolkit off is refused, naming both.
func TestNRIPluginNeedsTheToolkit(t *testing.T) {
	g := NewWithT(t)
	obj := validPolicy("nri-no-toolkit")
	spec := obj.Object["spec"].(map[string]any)
	g.Expect(unstructured.SetNestedField(spec, true, "cdi", "nriPluginEnabled")).To(Succeed())
	g.Expect(unstructured.SetNestedField(spec, false, "toolkit", "enabled")).To(Succeed())
	err := k8sClient.Create(context.Background(), obj)
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring("spec.cdi.nriPluginEnabled"))
	g.Expect(err.Error()).To(ContainSubstring("needs toolkit.enabled=true"))

	g.Expect(unstructured.SetNestedField(spec, true, "toolkit", "enabled")).To(Succeed())
	obj.SetName("nri-with-toolkit")
	g.Expect(k8sClient.Create(context.Background(), obj, client.DryRunAll)).To(Succeed())

	// Nothing reads GPU lists passed as a variable or mounts under NRI.
	// (The dry run replaced the object's content with the server's.)
	spec = obj.Object["spec"].(map[string]any)
	g.Expect(unstructured.SetNestedSlice(spec, []any{map[string]any{"name": "DEVICE_LIST_STRATEGY", "value": "envvar"}},
		"devicePlugin", "env")).To(Succeed())
	obj.SetName("nri-envvar")
	err = k8sClient.Create(context.Background(), obj, client.DryRunAll)
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring("spec.devicePlugin.env"))
	g.Expect(err.Error()).To(ContainSubstring("must name cdi-annotations or cdi-cri"))
}

func TestValidEdgeValuesAreAccepted(t *testing.T) {
	tests := map[string]struct {
		path  []string
		value any
	}{
		"driver digest":                   {p("driver", "version"), digest64},
		"toolkit tag and digest":          {p("toolkit", "version"), "v1.21.0@" + digest64},
		"two-part driver version":         {p("driver", "version"), "470.82"},
		"count as a string":               {p("daemonsets", "rollingUpdate", "maxUnavailable"), "1"},
		"100 percent":                     {p("driver", "upgradePolicy", "maxUnavailable"), "100%"},
		"unlimited parallel upgrades":     {p("driver", "upgradePolicy", "maxParallelUpgrades"), int64(0)},
		"repairs on a tenth of the fleet": {p("operator", "remediation"), map[string]any{"enabled": true, "maxParallel": "10%", "autoStart": false}},
		"disabled with empty version":     {p("toolkit"), map[string]any{"enabled": false, "version": ""}},
		"registry with a port":            {p("driver", "repository"), "registry.local:5000/nvidia"},
		"request equal to limit":          {p("driver", "resources"), map[string]any{"requests": map[string]any{"cpu": "1"}, "limits": map[string]any{"cpu": int64(1)}}},
		"prefixed label key":              {p("daemonsets", "labels"), map[string]any{"example.com/team": "gpu"}},
		"device plugin config with key":   {p("devicePlugin", "config"), map[string]any{"name": "plugin-config", "default": "a100-80gb"}},
		"drain selector":                  {p("driver", "upgradePolicy", "drain", "podSelector"), "app in (training, serving),!legacy,tier!=batch"},
		"toleration of every taint":       {p("daemonsets", "tolerations"), []any{map[string]any{"operator": "Exists"}}},
		"host's own driver at its root":   {p("hostPaths", "driverInstallDir"), "/"},
		"proxy credentials from a Secret": {p("driver", "env"), []any{map[string]any{"name": "HTTPS_PROXY",
			"valueFrom": map[string]any{"secretKeyRef": map[string]any{"name": "proxy", "key": "https_proxy.url", "optional": true}}}}},
		"toolkit variable of its own from a Secret": {p("toolkit", "env"), []any{map[string]any{"name": "NVIDIA_CTK_TOKEN",
			"valueFrom": map[string]any{"secretKeyRef": map[string]any{"name": "toolkit", "key": "token"}}}}},
		"dots inside a directory's name": {p("hostPaths", "kubeletRootDir"), "/var/lib/kubelet..old/.k8s"},
		"GKE's host paths": {p("hostPaths"), map[string]any{"rootFS": "/", "driverInstallDir": "/home/kubernetes/bin/nvidia",
			"kubeletRootDir": "/var/lib/kubelet"}},
		"NVIDIA's driver manager settings": {p("driver", "manager"), map[string]any{"env": []any{
			map[string]any{"name": "ENABLE_GPU_POD_EVICTION", "value": "True"}, map[string]any{"name": "ENABLE_AUTO_DRAIN", "value": "1"},
			map[string]any{"name": "DRAIN_TIMEOUT_SECONDS", "value": "1m30.5s"}, map[string]any{"name": "DRAIN_POD_SELECTOR_LABEL", "value": "app!=keep"},
			map[string]any{"name": "FORCE_REINSTALL", "value": "anything"}}}},
		"NoExecute toleration seconds": {p("daemonsets", "tolerations"), []any{map[string]any{"key": "example.com/maintenance", "operator": "Exists",
			"effect": "NoExecute", "tolerationSeconds": int64(300)}}},
		"precompiled driver branch": {p("driver"), map[string]any{"usePrecompiled": true, "version": "580",
			"nodePools": []any{map[string]any{"name": "a100", "nodeSelector": map[string]any{"gpu": "a100"}, "version": "570"}}}},
		"distinct driver pools": {p("driver", "nodePools"), []any{
			map[string]any{"name": "a100", "nodeSelector": map[string]any{"gpu": "a100", "zone": "a"}, "version": "550.54.15"},
			map[string]any{"name": "h100", "nodeSelector": map[string]any{"gpu": "h100"}, "devicePluginConfig": "H100_ts.4"},
		}},
	}
	i := 0
	for name, tt := range tests {
		i++
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			obj := validPolicy(fmt.Sprintf("valid-%d", i))
			spec := obj.Object["spec"].(map[string]any)
			g.Expect(unstructured.SetNestedField(spec, tt.value, tt.path...)).To(Succeed())
			g.Expect(k8sClient.Create(ctx, obj)).To(Succeed())
			// What the API server accepts, the operator renders into objects
			// the API server accepts too (issue 12, finding 4b).
			cp := &gpuv1.ClusterPolicy{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(obj), cp)).To(Succeed())
			renderAndDryRun(t, name, cp)
			g.Expect(k8sClient.Delete(ctx, obj)).To(Succeed())
		})
	}
}

func validPolicy(name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "nvidia.com/v1",
		"kind":       "ClusterPolicy",
		"metadata":   map[string]any{"name": name},
		"spec": map[string]any{
			"driver": map[string]any{"version": "535.154.05"},
		},
	}}
}

func manyEnv(n int) []any {
	env := make([]any, n)
	for i := range env {
		env[i] = map[string]any{"name": fmt.Sprintf("VAR_%d", i), "value": "x"}
	}
	return env
}

func p(path ...string) []string { return path }
