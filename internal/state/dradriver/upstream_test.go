package dradriver

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// The tests in this package pin the driver's RBAC, DeviceClasses and
// admission policy against NVIDIA's manifests (gpu-operator v26.7.0,
// manifests/state-dra-driver), copied into testdata so that they run
// without the upstream repository. They live beside the code rather than
// in internal/state/contract because the renderers they check are the
// package's own.

// upstreamNamespace is the namespace testdata puts in place of NVIDIA's
// template value.
const upstreamNamespace = "gpu-operator"

// upstreamObjects reads a testdata file of NVIDIA's objects into their
// typed structs, each with its kind set.
func upstreamObjects(t *testing.T, file string) []client.Object {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	decoder := clientgoscheme.Codecs.UniversalDeserializer()
	var out []client.Object
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("reading %s: %v", file, err)
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		obj, gvk, err := decoder.Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("decoding a document of %s: %v", file, err)
		}
		o, ok := obj.(client.Object)
		if !ok {
			t.Fatalf("%s holds a %T, not an object", file, obj)
		}
		// The decoder clears the kind; the tests key objects by it.
		o.GetObjectKind().SetGroupVersionKind(*gvk)
		out = append(out, o)
	}
}

// stripComments drops a document's comment lines: the header before the
// first document is comments alone.
func stripComments(doc []byte) []byte {
	var out [][]byte
	for line := range bytes.SplitSeq(doc, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			out = append(out, line)
		}
	}
	return bytes.Join(out, []byte("\n"))
}

// kindName names an object by its kind and name, the way RBAC objects of
// one name but several kinds are told apart.
func kindName(o client.Object) string {
	return o.GetObjectKind().GroupVersionKind().Kind + "/" + o.GetName()
}

// draInput is the render input of a policy with the given DRA settings.
func draInput(namespace string, computeDomains, mps bool) (state.RenderInput, *gpuv1.DRADriverSpec) {
	policy := &gpuv1.ClusterPolicy{}
	policy.Name, policy.UID = "cluster-policy", "11111111-2222-3333-4444-555555555555"
	d := &policy.Spec.DRADriver
	d.ComputeDomains.Enabled = &computeDomains
	if mps {
		d.FeatureGates = map[string]bool{"MPSSupport": true}
	}
	return state.RenderInput{Policy: policy, Namespace: namespace}, d
}

// Every object is applied server-side, which needs its kind, and pruned by
// the kinds the operand lists, so each must carry one of those.
func TestObjectsCarryTheirKinds(t *testing.T) {
	in, d := draInput(upstreamNamespace, true, true)
	objs := access(in, d)
	objs = append(objs, deviceClasses(in.Policy, true)...)
	objs = append(objs, sliceAdmissionPolicy(in.Policy, in.Namespace)...)
	kinds := append(slices.Clone(render.RBACKinds), render.KindDeviceClass,
		render.KindValidatingAdmissionPolicy, render.KindValidatingAdmissionPolicyBinding)
	for _, o := range objs {
		gvk := o.GetObjectKind().GroupVersionKind()
		if gvk == (schema.GroupVersionKind{}) || !slices.Contains(kinds, gvk) {
			t.Errorf("%T %s has kind %v, not one of %v", o, o.GetName(), gvk, kinds)
		}
	}
}
