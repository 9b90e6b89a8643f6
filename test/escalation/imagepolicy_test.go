package escalation

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/gpu-operator/gpu-operator/internal/test/crdschema"
)

// chartObjects renders one template of the chart with values.
func chartObjects(t *testing.T, template string, values ...string) []*unstructured.Unstructured {
	t.Helper()
	root := crdschema.RepoRoot()
	args := []string{"template", "gpu-operator", filepath.Join(root, "deployments", "gpu-operator"), "-n", namespace,
		"--show-only", template}
	for _, v := range values {
		args = append(args, "--set", v)
	}
	out, err := exec.Command(filepath.Join(root, "bin", "helm"), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("helm template (run make tools): %v\n%s", err, out)
	}
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(string(out)), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return objs
		} else if err != nil {
			t.Fatal(err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

// sample reads one of config/samples.
func sample(t *testing.T, name string) *unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(crdschema.RepoRoot(), "config", "samples", name))
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

// Who may write a ClusterPolicy, an NVIDIADriver or a GPUCluster chooses
// the images of privileged pods on every GPU node. With
// operator.allowedImagePrefixes, the chart's admission policy refuses such
// a write naming any other image, wherever in the spec, and lets the
// samples, whose images are NVIDIA's, through.
func TestAllowedImagePrefixesRefuseOtherImages(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	// Made before the list: an object naming another image.
	before := sample(t, "nvidia_v1alpha1_nvidiadriver.yaml")
	before.SetName("made-before-the-list")
	before.Object["spec"].(map[string]any)["repository"] = "registry.example.com/nvidia"
	g.Expect(admin.Create(ctx, before)).To(Succeed())
	objs := chartObjects(t, "templates/image-policy.yaml", "operator.allowedImagePrefixes={nvcr.io/nvidia/,registry.k8s.io/nfd/}")
	g.Expect(objs).To(HaveLen(2), "the policy and its binding")
	for _, o := range objs {
		g.Expect(admin.Create(ctx, o)).To(Succeed(), o.GetKind())
		defer func() { g.Expect(client.IgnoreNotFound(admin.Delete(ctx, o))).To(Succeed()) }()
	}
	root := crdschema.RepoRoot()
	out, err := exec.Command(filepath.Join(root, "bin", "helm"), "template", "gpu-operator",
		filepath.Join(root, "deployments", "gpu-operator"), "-n", namespace).CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	g.Expect(string(out)).NotTo(ContainSubstring("allowed-images"), "off by default")

	refused := func(o *unstructured.Unstructured) error {
		return admin.Create(ctx, o, client.DryRunAll)
	}
	policy := func(mutate func(spec map[string]any)) *unstructured.Unstructured {
		u := sample(t, "nvidia_v1_clusterpolicy.yaml")
		mutate(u.Object["spec"].(map[string]any))
		return u
	}
	section := func(spec map[string]any, name string) map[string]any {
		s, _ := spec[name].(map[string]any)
		if s == nil {
			s = map[string]any{}
			spec[name] = s
		}
		return s
	}
	// The API server enforces a policy once its informers have it.
	g.Eventually(func() error {
		return refused(policy(func(spec map[string]any) { section(spec, "driver")["repository"] = "evil.example.com/nvidia" }))
	}).WithTimeout(30*time.Second).Should(Satisfy(apierrors.IsForbidden), "the policy takes effect")

	// A write that leaves its spec as it is passes (the operator's
	// finalizer, a label), so that it can still be deleted; one that
	// changes the spec is held to the list.
	g.Expect(admin.Patch(ctx, before.DeepCopy(), client.RawPatch("application/merge-patch+json",
		[]byte(`{"metadata":{"finalizers":["nvidia.com/cleanup"]}}`)))).To(Succeed())
	g.Expect(admin.Patch(ctx, before.DeepCopy(), client.RawPatch("application/merge-patch+json",
		[]byte(`{"spec":{"version":"580.95.05"}}`)))).To(MatchError(ContainSubstring("registry.example.com/nvidia/driver")))
	g.Expect(admin.Patch(ctx, before.DeepCopy(), client.RawPatch("application/merge-patch+json",
		[]byte(`{"metadata":{"finalizers":null}}`)))).To(Succeed())
	g.Expect(admin.Delete(ctx, before)).To(Succeed())

	tests := map[string]struct {
		obj  *unstructured.Unstructured
		want string // "" when allowed
	}{
		"the sample ClusterPolicy": {obj: policy(func(map[string]any) {})},
		"the sample NVIDIADriver":  {obj: sample(t, "nvidia_v1alpha1_nvidiadriver.yaml")},
		"another registry for the driver": {
			obj:  policy(func(spec map[string]any) { section(spec, "driver")["repository"] = "evil.example.com/nvidia" }),
			want: "evil.example.com/nvidia/driver"},
		"a registry in the image name": {
			obj: policy(func(spec map[string]any) {
				section(spec, "devicePlugin")["repository"] = ""
				section(spec, "devicePlugin")["image"] = "evil.example.com/k8s-device-plugin"
			}),
			want: "evil.example.com/k8s-device-plugin"},
		"a prefix of the allowed one's path": {
			obj:  policy(func(spec map[string]any) { section(spec, "toolkit")["repository"] = "nvcr.io/nvidia-evil" }),
			want: "nvcr.io/nvidia-evil/container-toolkit"},
		"GPUDirect Storage's image": {
			obj: policy(func(spec map[string]any) {
				section(spec, "gds")["enabled"] = true
				section(spec, "gds")["repository"] = "evil.example.com"
			}),
			want: "evil.example.com/"},
		"an NVIDIADriver's image": {
			obj: func() *unstructured.Unstructured {
				u := sample(t, "nvidia_v1alpha1_nvidiadriver.yaml")
				u.Object["spec"].(map[string]any)["repository"] = "evil.example.com/nvidia"
				return u
			}(),
			want: "evil.example.com/nvidia/driver"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			err := refused(tt.obj)
			if tt.want == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
			g.Expect(err.Error()).To(And(ContainSubstring("operator.allowedImagePrefixes"), ContainSubstring(tt.want)))
		})
	}
}
