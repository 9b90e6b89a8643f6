package driverpool_test

import (
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	gpuv1alpha1 "github.com/gpu-operator/gpu-operator/api/v1alpha1"
	"github.com/gpu-operator/gpu-operator/internal/driverpool"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/driver"
	"github.com/gpu-operator/gpu-operator/internal/state/registry"
	"github.com/gpu-operator/gpu-operator/internal/test/fixture"
)

// driverDaemonSets renders the driver state under a set of pools, by name.
func driverDaemonSets(t *testing.T, cp *gpuv1.ClusterPolicy, pools *driverpool.Set, nodes []corev1.Node) map[string]*appsv1.DaemonSet {
	t.Helper()
	graph, err := registry.Graph()
	if err != nil {
		t.Fatal(err)
	}
	in := state.RenderInput{Policy: cp, Namespace: fixture.Namespace, DriverPools: pools.Groups(nodes),
		Variants: fixture.Variants(cp), Gate: graph.Gate(state.Driver)}
	objs, err := driver.Operand{}.Render(in)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*appsv1.DaemonSet{}
	for _, o := range objs {
		if ds, ok := o.(*appsv1.DaemonSet); ok {
			out[ds.Name] = ds
		}
	}
	return out
}

func gpuNode(name string, labels map[string]string) corev1.Node {
	l := map[string]string{state.LabelOSReleaseID: "ubuntu", state.LabelOSVersionID: "22.04"}
	for k, v := range labels {
		l[k] = v
	}
	return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}
}

// Moving from the ClusterPolicy's pools to NVIDIADrivers named after them
// with the same settings replaces no driver: the DaemonSets keep their
// names, their pod specs and template hashes, so the upgrade finds every
// driver pod current. Only NVIDIA's app label changes, which replaces
// nothing: an NVIDIADriver's is its DaemonSet's name, as at NVIDIA.
// NVIDIA's own migration replaces every driver.
func TestMigrationToNVIDIADriversKeepsEveryDriver(t *testing.T) {
	g := NewWithT(t)
	policies, err := fixture.Policies()
	g.Expect(err).NotTo(HaveOccurred())
	before := policies["full"]
	g.Expect(before.Spec.Driver.NodePools).NotTo(BeEmpty(), "the fixture has pools to migrate")
	var nodes []corev1.Node
	var drivers []gpuv1alpha1.NVIDIADriver
	for _, p := range before.Spec.Driver.NodePools {
		labels := map[string]string{}
		for k, v := range p.NodeSelector {
			labels[k] = string(v)
		}
		nodes = append(nodes, gpuNode("node-"+p.Name, labels))
		drivers = append(drivers, equivalent(before, p.Name, p.NodeSelector, p.Version))
	}
	nodes = append(nodes, gpuNode("node-default", nil))
	deflt := equivalent(before, gpuv1.DefaultDriverPool, nil, "")
	deflt.Spec.Default = true
	drivers = append(drivers, deflt)

	after := before.DeepCopy()
	after.Spec.Driver.UseNvidiaDriverCRD = ptr.To(true)
	want := driverDaemonSets(t, before, driverpool.FromPolicy(before), nodes)
	got := driverDaemonSets(t, after, driverpool.Resolve(after, drivers), nodes)
	g.Expect(want).NotTo(BeEmpty())
	g.Expect(got).To(HaveLen(len(want)))
	for name, ds := range want {
		g.Expect(got).To(HaveKey(name))
		g.Expect(got[name].Spec.Template.Spec).To(Equal(ds.Spec.Template.Spec), "DaemonSet %s", name)
		g.Expect(ds.Spec.Template.Labels).To(HaveKeyWithValue("app", "nvidia-driver-daemonset"))
		g.Expect(got[name].Spec.Template.Labels).To(HaveKeyWithValue("app", name))
		// NVIDIA's app label alone differs, and the hash of the metadata
		// with it: the running drivers are given the new label, not
		// replaced.
		for _, tpl := range []*corev1.PodTemplateSpec{&ds.Spec.Template, &got[name].Spec.Template} {
			delete(tpl.Labels, "app")
			delete(tpl.Annotations, render.AnnotationMetadataHash)
		}
		g.Expect(got[name].Spec.Template.Annotations).To(Equal(ds.Spec.Template.Annotations), "DaemonSet %s", name)
		g.Expect(got[name].Spec.Template.Labels).To(Equal(ds.Spec.Template.Labels), "DaemonSet %s", name)
	}

	// A changed setting is a new driver: the template hash moves, and the
	// upgrade replaces the pool's drivers within its budget.
	drivers[len(drivers)-1].Spec.Env = []gpuv1.EnvVar{{Name: "NVIDIA_DEBUG", Value: "1"}}
	changed := driverDaemonSets(t, after, driverpool.Resolve(after, drivers), nodes)
	for name, ds := range want {
		if ds.Spec.Template.Spec.Affinity.NodeAffinity.String() != changed[name].Spec.Template.Spec.Affinity.NodeAffinity.String() {
			t.Fatalf("DaemonSet %s: the gate changed with the env", name)
		}
	}
	defaultPool, _ := driverpool.FromPolicy(before).DaemonSetFor("node-default", nodes[len(nodes)-1].Labels)
	g.Expect(changed).To(HaveKey(defaultPool))
	g.Expect(changed[defaultPool].Spec.Template.Annotations).NotTo(Equal(want[defaultPool].Spec.Template.Annotations))
}

// equivalent is the NVIDIADriver that describes a ClusterPolicy pool as it
// is, as a user (or the chart's default NVIDIADriver) writes it.
func equivalent(cp *gpuv1.ClusterPolicy, name string, selector map[string]gpuv1.LabelValue, version gpuv1.DriverVersion) gpuv1alpha1.NVIDIADriver {
	d := &cp.Spec.Driver
	if version == "" {
		version = d.Version
	}
	nvd := gpuv1alpha1.NVIDIADriver{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: gpuv1alpha1.NVIDIADriverSpec{
		DriverType: "gpu", Repository: d.Repository, Image: d.Image, Version: string(version),
		KernelModuleType: d.KernelModuleType, ImagePullPolicy: d.ImagePullPolicy, ImagePullSecrets: d.ImagePullSecrets,
		Env: d.Env, Args: d.Args, Resources: d.Resources, NodeSelector: selector, HostNetwork: d.HostNetwork,
		StartupProbe: d.StartupProbe, LivenessProbe: d.LivenessProbe, ReadinessProbe: d.ReadinessProbe, SecretEnv: d.SecretEnv,
	}}
	if d.RepoConfig != nil {
		nvd.Spec.RepoConfig = &gpuv1alpha1.ConfigMapRef{Name: d.RepoConfig.ConfigMapName}
	}
	if d.CertConfig != nil {
		nvd.Spec.CertConfig = &gpuv1alpha1.ConfigMapRef{Name: d.CertConfig.Name}
	}
	return nvd
}
