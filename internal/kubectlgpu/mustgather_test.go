package kubectlgpu

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/scheme"
	"github.com/gpu-operator/gpu-operator/internal/state/registry"
)

const ns = "gpu-operator"

func gpuNode(name string, driver gpuv1.StateValue) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		gpuv1.LabelGPUPresent: "true", gpuv1.StateLabel("driver"): string(driver)}}}
}

func pod(name, node string, labels map[string]string, restarts int32) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: corev1.PodSpec{NodeName: node, InitContainers: []corev1.Container{{Name: "init"}},
			Containers: []corev1.Container{{Name: "main"}}},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "main", RestartCount: restarts}}},
	}
}

// untar reads the archive's files, name -> content, without the
// directory every file sits in.
func untar(g Gomega, data []byte) map[string]string {
	gz, err := gzip.NewReader(bytes.NewReader(data))
	g.Expect(err).NotTo(HaveOccurred())
	tr := tar.NewReader(gz)
	out := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		g.Expect(err).NotTo(HaveOccurred())
		b, err := io.ReadAll(tr)
		g.Expect(err).NotTo(HaveOccurred())
		dir, name, _ := strings.Cut(h.Name, "/")
		g.Expect(dir).To(Equal("gather"))
		out[name] = string(b)
	}
}

// readyNode is a GPU node ready on every state of the chain.
func readyNode(name string) *corev1.Node {
	n := gpuNode(name, gpuv1.StateReady)
	graph, _ := registry.Graph()
	for _, s := range graph.PerNode() {
		n.Labels[gpuv1.StateLabel(string(s))] = string(gpuv1.StateReady)
	}
	return n
}

func fleet() []client.Object {
	operator := map[string]string{render.LabelName: "gpu-operator", render.LabelComponent: "operator"}
	driver := map[string]string{render.LabelManagedBy: render.ManagedBy}
	return []client.Object{
		&gpuv1.ClusterPolicy{ObjectMeta: metav1.ObjectMeta{Name: "cluster-policy"}},
		gpuNode("gpu-a", gpuv1.StatePending), gpuNode("gpu-b", gpuv1.StatePending), readyNode("gpu-c"),
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cpu-only"}},
		pod("gpu-operator-0", "cpu-only", operator, 1),
		pod("nvidia-driver-a", "gpu-a", driver, 2), pod("nvidia-driver-b", "gpu-b", driver, 0),
		pod("nvidia-driver-c", "gpu-c", driver, 0),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "default-mig-parted-config", Namespace: ns, Labels: driver},
			Data: map[string]string{"config.yaml": "version: v1"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "someone-elses", Namespace: ns},
			Data: map[string]string{"token": "do-not-gather"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "registry", Namespace: ns},
			Data: map[string][]byte{"password": []byte("do-not-gather")}},
		&corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "gpu-a.1", Namespace: "default"},
			InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: "gpu-a"}, Reason: "UpgradeStep"},
		&corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "pod.1", Namespace: "default"},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "web"}, Reason: "Scheduled"},
		&resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "gpu-a-gpu"}, Spec: resourcev1.ResourceSliceSpec{Driver: "gpu.nvidia.com"}},
		&resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "gpu-a-nic"}, Spec: resourcev1.ResourceSliceSpec{Driver: "nic.example.com"}},
	}
}

func newGatherer(g Gomega, objs []client.Object) *gatherer {
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).
		WithIndex(&corev1.Event{}, "involvedObject.kind", func(o client.Object) []string {
			return []string{o.(*corev1.Event).InvolvedObject.Kind}
		}).Build()
	graph, err := registry.Graph()
	g.Expect(err).NotTo(HaveOccurred())
	logs := func(_ context.Context, namespace, pod, container string, previous bool, tail int64) ([]byte, error) {
		if pod == "nvidia-driver-b" {
			return nil, fmt.Errorf("pods %q is forbidden", pod)
		}
		return fmt.Appendf(nil, "log of %s/%s/%s previous=%t tail=%d\n", namespace, pod, container, previous, tail), nil
	}
	return &gatherer{c: c, logs: logs, graph: graph, namespace: ns, maxNodes: 1, tail: 100, slicesServed: true}
}

// must-gather holds the policies, the GPU nodes, the operator's and the
// chosen nodes' logs (a restarted container's previous run too), the
// operator's ConfigMaps, node events and NVIDIA's ResourceSlices; it
// holds no Secret and no other ConfigMap's data, and says what it left
// out.
func TestMustGather(t *testing.T) {
	g := NewWithT(t)
	var buf bytes.Buffer
	m, err := newGatherer(g, fleet()).gather(context.Background(), &buf, "gather", time.Unix(0, 0))
	g.Expect(err).NotTo(HaveOccurred())
	files := untar(g, buf.Bytes())

	g.Expect(files).To(HaveKeyWithValue("cluster/clusterpolicies.yaml", ContainSubstring("name: cluster-policy")))
	g.Expect(files["nodes.yaml"]).To(And(ContainSubstring("name: gpu-a"), ContainSubstring("name: gpu-c"),
		Not(ContainSubstring("cpu-only"))), "GPU nodes only")
	g.Expect(files["namespace/pods.txt"]).To(ContainSubstring("nvidia-driver-c"), "every pod, as a table")

	g.Expect(m.Nodes).To(Equal([]string{"gpu-a"}), "the first not-ready node, --max-nodes 1")
	g.Expect(m.NodesWhy).To(ContainSubstring("the first 1 of 2"))
	g.Expect(files).To(HaveKeyWithValue("logs/operator/gpu-operator-0/main.log", "log of gpu-operator/gpu-operator-0/main previous=false tail=100\n"))
	g.Expect(files).To(HaveKey("logs/operator/gpu-operator-0/main.previous.log"), "a restarted container's last run")
	g.Expect(files).To(HaveKey("logs/gpu-a/nvidia-driver-a/init.log"), "init containers too")
	g.Expect(files).To(HaveKey("logs/gpu-a/nvidia-driver-a/main.previous.log"))
	g.Expect(files).To(HaveKey("logs/gpu-a/nvidia-driver-a.yaml"))
	g.Expect(files).NotTo(HaveKey(HavePrefix("logs/gpu-c/")), "a ready node not asked for")

	g.Expect(files["namespace/configmaps.yaml"]).To(And(ContainSubstring("default-mig-parted-config"), Not(ContainSubstring("someone-elses"))))
	g.Expect(files["events/nodes.yaml"]).To(And(ContainSubstring("UpgradeStep"), Not(ContainSubstring("Scheduled"))))
	g.Expect(files["resourceslices.yaml"]).To(And(ContainSubstring("gpu-a-gpu"), Not(ContainSubstring("gpu-a-nic"))))
	for name, content := range files {
		g.Expect(content).NotTo(ContainSubstring("do-not-gather"), name)
	}

	var manifest struct{ Files, LeftOut []string }
	g.Expect(json.Unmarshal([]byte(files["manifest.json"]), &manifest)).To(Succeed())
	g.Expect(manifest.Files).To(ConsistOf(keys(files)))
	g.Expect(manifest.LeftOut).To(ContainElements("Secrets: never read",
		ContainSubstring("neither the operator's nor the chart's (names only): someone-elses")))
}

// A node named with --node is gathered even when ready; a log the server
// refuses is left out with why, and the rest goes on.
func TestMustGatherNamedNodes(t *testing.T) {
	g := NewWithT(t)
	gt := newGatherer(g, fleet())
	gt.nodes = []string{"gpu-b", "gpu-c"}
	var buf bytes.Buffer
	m, err := gt.gather(context.Background(), &buf, "gather", time.Unix(0, 0))
	g.Expect(err).NotTo(HaveOccurred())
	files := untar(g, buf.Bytes())
	g.Expect(m.NodesWhy).To(Equal("named with --node"))
	g.Expect(files).To(HaveKey("logs/gpu-c/nvidia-driver-c/main.log"))
	g.Expect(files).NotTo(HaveKey("logs/gpu-b/nvidia-driver-b/main.log"))
	g.Expect(m.LeftOut).To(ContainElement(ContainSubstring("logs/gpu-b/nvidia-driver-b/main.log: pods \"nvidia-driver-b\" is forbidden")))

	var text bytes.Buffer
	g.Expect(m.writeText(&text, "out.tar.gz")).To(Succeed())
	g.Expect(text.String()).To(And(ContainSubstring("Wrote out.tar.gz"), ContainSubstring("gpu-b, gpu-c (named with --node)"),
		ContainSubstring("Left out:\n  - ")))
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
