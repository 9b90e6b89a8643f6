package crd

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	gpuv1alpha1 "github.com/gpu-operator/gpu-operator/api/v1alpha1"
)

// readNVIDIADrivers reads the NVIDIADrivers of a multi-document file.
func readNVIDIADrivers(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []*unstructured.Unstructured
	for _, doc := range bytes.Split(data, []byte("\n---\n")) {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &obj.Object); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if obj.GetKind() != "NVIDIADriver" {
			t.Fatalf("%s: kind %q is not NVIDIADriver", path, obj.GetKind())
		}
		out = append(out, obj)
	}
	return out
}

// NVIDIA's NVIDIADriver examples (its documentation's and its sample)
// apply unchanged with strict field validation; what this operator does
// not implement is kept and reported.
func TestNVIDIAsNVIDIADriversApply(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "nvidiadrivers", "*.yaml"))
	if err != nil || len(files) < 6 {
		t.Fatalf("NVIDIA's examples are missing: %v %v", files, err)
	}
	// manager: {} is honoured: NVIDIA's driver manager defaults.
	ignored := map[string][]string{
		"nvidiadriver-sample": {"spec.licensingConfig", "spec.virtualTopologyConfig"},
	}
	for _, file := range files {
		for _, obj := range readNVIDIADrivers(t, file) {
			t.Run(filepath.Base(file)+"/"+obj.GetName(), func(t *testing.T) {
				g := NewWithT(t)
				ctx := context.Background()
				g.Expect(k8sClient.Create(ctx, obj)).To(Succeed())
				t.Cleanup(func() { _ = k8sClient.Delete(ctx, obj) })

				got := &gpuv1alpha1.NVIDIADriver{}
				g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(obj), got)).To(Succeed())
				g.Expect(got.Spec.DriverType).To(Equal("gpu"))
				g.Expect(got.Spec.KernelModuleType).To(Equal("auto"), "defaulted")
				g.Expect(got.Spec.Image).To(BeEquivalentTo("driver"))
				g.Expect(got.Spec.Runs()).To(BeTrue())
				want := append([]string{}, ignored[got.Name]...)
				if got.Name == "demo-gold" && filepath.Base(file) == "nvd-demo-gold.yaml" {
					// gdrcopy's args: [], which NVIDIA's operator ignores too.
					want = append(want, "spec.gdrcopy.args")
					g.Expect(got.Spec.StartupProbe).To(Equal(&gpuv1.ContainerProbeSpec{InitialDelaySeconds: 60, PeriodSeconds: 10,
						TimeoutSeconds: 60, FailureThreshold: 120}), "NVIDIA's startupProbe, acted on")
				}
				g.Expect(got.Spec.IgnoredFields()).To(ConsistOf(want))
			})
		}
	}
}

// An empty NVIDIADriver is filled in by the defaults NVIDIA's has.
func TestNVIDIADriverDefaults(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	nvd := &gpuv1alpha1.NVIDIADriver{}
	nvd.Name = "empty"
	g.Expect(k8sClient.Create(ctx, nvd)).To(Succeed())
	t.Cleanup(func() { _ = k8sClient.Delete(ctx, nvd) })
	got := &gpuv1alpha1.NVIDIADriver{}
	g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(nvd), got)).To(Succeed())
	g.Expect(got.Spec).To(Equal(gpuv1alpha1.NVIDIADriverSpec{DriverType: "gpu", KernelModuleType: "auto", Image: "nvcr.io/nvidia/driver"}))
}

// Each invalid NVIDIADriver is refused with an answer that names the field
// and the fix.
func TestInvalidNVIDIADriversAreRejected(t *testing.T) {
	for name, tc := range map[string]struct {
		mutate func(*gpuv1alpha1.NVIDIADriver)
		wants  []string
	}{
		"default with a nodeSelector": {
			mutate: func(d *gpuv1alpha1.NVIDIADriver) {
				d.Spec.Default = true
				d.Spec.NodeSelector = gpuv1.Labels{"tier": "gold"}
			},
			wants: []string{"spec.nodeSelector", "default NVIDIADriver must not use nodeSelector"},
		},
		"a name too long for a pool label": {
			mutate: func(d *gpuv1alpha1.NVIDIADriver) { d.Name = "a-name-far-too-long-for-a-driver-pool" },
			wants:  []string{"metadata.name", "at most 32"},
		},
		"a digest with precompiled drivers": {
			mutate: func(d *gpuv1alpha1.NVIDIADriver) {
				d.Spec.UsePrecompiled = ptr.To(true)
				d.Spec.Version = "sha256:" + strings.Repeat("a", 64)
			},
			wants: []string{"spec.version", "driver branch such as 580"},
		},
		"GPUDirect Storage with precompiled drivers": {
			mutate: func(d *gpuv1alpha1.NVIDIADriver) {
				d.Spec.UsePrecompiled = ptr.To(true)
				d.Spec.Version = "580"
				d.Spec.GDRCopy = &gpuv1.GDRCopySpec{Enabled: ptr.To(true)}
			},
			wants: []string{"spec.usePrecompiled", "which precompiled images do not carry"},
		},
		"a branch without precompiled images": {
			mutate: func(d *gpuv1alpha1.NVIDIADriver) { d.Spec.Version = "580" },
			wants:  []string{"spec.version", "a driver branch such as 580 names images only with usePrecompiled"},
		},
		"a version with the OS": {
			mutate: func(d *gpuv1alpha1.NVIDIADriver) { d.Spec.Version = "580.126.20-ubuntu22.04" },
			wants:  []string{"spec.version", "the operator adds the OS suffix"},
		},
		"a selector on GFD's labels": {
			mutate: func(d *gpuv1alpha1.NVIDIADriver) {
				d.Spec.NodeSelector = gpuv1.Labels{"nvidia.com/gpu.product": "H100"}
			},
			wants: []string{"spec.nodeSelector", "Label the nodes yourself"},
		},
		"args without init": {
			mutate: func(d *gpuv1alpha1.NVIDIADriver) { d.Spec.Args = []string{"-m", "8"} },
			wants:  []string{"spec.args", "first must be init"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			d := &gpuv1alpha1.NVIDIADriver{}
			d.Name = "invalid"
			tc.mutate(d)
			err := k8sClient.Create(context.Background(), d)
			if err == nil {
				_ = k8sClient.Delete(context.Background(), d)
			}
			g.Expect(err).To(HaveOccurred())
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
			for _, want := range tc.wants {
				g.Expect(err.Error()).To(ContainSubstring(want))
			}
		})
	}
}

// driverType and usePrecompiled cannot change: another driver type or
// build is another NVIDIADriver, which the nodes move to.
func TestNVIDIADriverImmutableFields(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	d := &gpuv1alpha1.NVIDIADriver{}
	d.Name = "immutable"
	d.Spec.UsePrecompiled = ptr.To(false)
	g.Expect(k8sClient.Create(ctx, d)).To(Succeed())
	t.Cleanup(func() { _ = k8sClient.Delete(ctx, d) })

	changed := d.DeepCopy()
	changed.Spec.UsePrecompiled = ptr.To(true)
	err := k8sClient.Update(ctx, changed)
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring("usePrecompiled is immutable"))

	got := &gpuv1alpha1.NVIDIADriver{}
	g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(d), got)).To(Succeed())
	got.Spec.DriverType = gpuv1alpha1.DriverTypeVGPU
	err = k8sClient.Update(ctx, got)
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring("driverType is immutable"))
}
