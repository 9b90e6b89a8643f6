package packaging

import (
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	gpuv1alpha1 "github.com/gpu-operator/gpu-operator/api/v1alpha1"
	"github.com/gpu-operator/gpu-operator/internal/driverpool"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/driver"
	"github.com/gpu-operator/gpu-operator/internal/state/registry"
	"github.com/gpu-operator/gpu-operator/internal/test/crdschema"
)

func renderedPolicy(t *testing.T, objs []*unstructured.Unstructured, name string) *gpuv1.ClusterPolicy {
	t.Helper()
	cp := &gpuv1.ClusterPolicy{}
	o := find(objs, "ClusterPolicy", name)
	if o == nil {
		t.Fatalf("no ClusterPolicy %s rendered", name)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, cp); err != nil {
		t.Fatal(err)
	}
	defaulted, err := crdschema.Defaulted(cp)
	if err != nil {
		t.Fatal(err)
	}
	return defaulted
}

// driverTemplates renders the driver DaemonSets' pod templates of a pool
// set, by DaemonSet name, for an Ubuntu and a RHEL GPU node.
func driverTemplates(t *testing.T, cp *gpuv1.ClusterPolicy, pools *driverpool.Set) map[string]corev1.PodTemplateSpec {
	t.Helper()
	graph, err := registry.Graph()
	if err != nil {
		t.Fatal(err)
	}
	var nodes []corev1.Node
	for _, os := range []state.OSRelease{{ID: "ubuntu", VersionID: "22.04"}, {ID: "rhel", VersionID: "9.4"}} {
		nodes = append(nodes, corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: os.String(),
			Labels: map[string]string{state.LabelOSReleaseID: os.ID, state.LabelOSVersionID: os.VersionID,
				state.LabelKernelVersion: "5.15.0-1040-azure"}}})
	}
	// Every precompiled image is found.
	pools.Images = map[string]driverpool.ImageVerdict{}
	for i := range nodes {
		if image := pools.Assign(nodes[i].Name, nodes[i].Labels).Image; image != "" {
			pools.Images[image] = driverpool.ImageVerdict{State: driverpool.ImageAvailable}
		}
	}
	objs, err := driver.Operand{}.Render(state.RenderInput{Policy: cp, Namespace: "gpu-operator", DriverPools: pools.Groups(nodes),
		Gate: graph.Gate(state.Driver)})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]corev1.PodTemplateSpec{}
	for _, o := range objs {
		if ds, ok := o.(*appsv1.DaemonSet); ok {
			out[ds.Name] = ds.Spec.Template
		}
	}
	return out
}

// driver.nvidiaDriverCRD.enabled hands the driver to NVIDIADrivers, as in
// NVIDIA's chart, and its default NVIDIADriver carries the values' driver
// settings: the drivers it renders are the ones the ClusterPolicy rendered
// before, byte for byte, so turning it on replaces none.
func TestNVIDIADriverCRDValues(t *testing.T) {
	g := NewWithT(t)
	for _, values := range [][]string{nil, {"-f", fullValues}, {"--set", "driver.usePrecompiled=true", "--set-string", "driver.version=580"},
		{"--set", "gds.enabled=true", "--set", "gdrcopy.enabled=true", "--set", "gdrcopy.imagePullSecrets={ngc}"}} {
		before := renderedPolicy(t, template(t, values...), policyName(values))
		g.Expect(before.Spec.Driver.UsesNVIDIADrivers()).To(BeFalse())
		g.Expect(find(template(t, values...), "NVIDIADriver", "default")).To(BeNil())

		objs := template(t, append(values, "--set", "driver.nvidiaDriverCRD.enabled=true")...)
		after := renderedPolicy(t, objs, policyName(values))
		g.Expect(after.Spec.Driver.UsesNVIDIADrivers()).To(BeTrue())
		raw := find(objs, "NVIDIADriver", "default")
		g.Expect(raw).NotTo(BeNil())
		nvd := gpuv1alpha1.NVIDIADriver{}
		g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(raw.Object, &nvd)).To(Succeed())
		g.Expect(nvd.Spec.Default).To(BeTrue())
		g.Expect(nvd.Spec.DriverType).To(Equal("gpu"))
		g.Expect(nvd.Spec.IsPrecompiled()).To(Equal(before.Spec.Driver.IsPrecompiled()))

		want := driverTemplates(t, before, driverpool.FromPolicy(before))
		got := driverTemplates(t, after, driverpool.Resolve(after, []gpuv1alpha1.NVIDIADriver{nvd}))
		g.Expect(want).NotTo(BeEmpty())
		// NVIDIA's app label, alone, differs (and the hash of the
		// metadata with it): an NVIDIADriver's is its DaemonSet's name;
		// labels replace no driver.
		for name := range want {
			g.Expect(got[name].Labels).To(HaveKeyWithValue("app", name))
			for _, tpl := range []corev1.PodTemplateSpec{got[name], want[name]} {
				delete(tpl.Labels, "app")
				delete(tpl.Annotations, render.AnnotationMetadataHash)
			}
		}
		g.Expect(got).To(Equal(want), "values %v", values)
	}

	objs := template(t, "--set", "driver.nvidiaDriverCRD.enabled=true", "--set", "driver.nvidiaDriverCRD.deployDefaultCR=false")
	g.Expect(find(objs, "NVIDIADriver", "default")).To(BeNil())
	g.Expect(renderedPolicy(t, objs, "cluster-policy").Spec.Driver.UsesNVIDIADrivers()).To(BeTrue())
}

// policyName is the ClusterPolicy's name under a values file.
func policyName(values []string) string {
	if len(values) > 0 && values[0] == "-f" {
		return "gpu-policy"
	}
	return "cluster-policy"
}
