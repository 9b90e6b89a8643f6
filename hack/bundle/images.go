package main

import (
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpu-operator/gpu-operator/internal/driverpool"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/cudaworkload"
	"github.com/gpu-operator/gpu-operator/internal/state/registry"
	"github.com/gpu-operator/gpu-operator/internal/test/fixture"
)

// driverOSes are the operating systems whose driver images a disconnected
// cluster mirrors by default: the driver pools' OSes docs/supported-nodes.md lists.
var driverOSes = []state.OSRelease{{ID: "ubuntu", VersionID: "22.04"}, {ID: "ubuntu", VersionID: "24.04"}, {ID: "rhel", VersionID: "9.4"}}

// relatedImages lists every image the operator runs with the CRD's
// defaults, for OLM's disconnected mirroring: the operator's own and each
// operand's, rendered as the operator renders them (the shared default
// policy of the golden tests), a driver image per supported OS.
func relatedImages(version string) ([]map[string]string, error) {
	graph, err := registry.Graph()
	if err != nil {
		return nil, err
	}
	policies, err := fixture.Policies()
	if err != nil {
		return nil, err
	}
	cp := policies["default"]
	var nodes []corev1.Node
	for _, os := range driverOSes {
		nodes = append(nodes, corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: os.String(),
			Labels: map[string]string{state.LabelOSReleaseID: os.ID, state.LabelOSVersionID: os.VersionID}}})
	}
	// DRAInUse: a disconnected cluster mirrors the DRA driver's image too,
	// for the day a pool moves to allocation mode dra.
	in := state.RenderInput{Policy: cp, Namespace: fixture.Namespace, DriverPools: driverpool.FromPolicy(cp).Groups(nodes),
		Variants: fixture.Variants(cp), DRAInUse: true}
	images := []string{fmt.Sprintf("%s:v%s", image, version)}
	for _, s := range graph.States() {
		in.Gate = graph.Gate(s.Name)
		objs, err := s.Operand.Render(in)
		if err != nil {
			return nil, fmt.Errorf("rendering %s: %w", s.Name, err)
		}
		for _, o := range objs {
			var pod *corev1.PodSpec
			switch w := o.(type) {
			case *appsv1.DaemonSet:
				pod = &w.Spec.Template.Spec
			case *appsv1.Deployment:
				pod = &w.Spec.Template.Spec
			default:
				continue
			}
			for _, c := range slices.Concat(pod.InitContainers, pod.Containers) {
				images = append(images, c.Image)
			}
		}
	}
	// The CUDA workload proof's image: its pods are made per node.
	for _, c := range cudaworkload.Pod(cp, fixture.Namespace, "node", cudaworkload.Request{Resource: "nvidia.com/gpu"}).Spec.Containers {
		images = append(images, c.Image)
	}
	slices.Sort(images)
	images = slices.Compact(images)
	out := make([]map[string]string, 0, len(images))
	for _, img := range images {
		out = append(out, map[string]string{"name": imageName(img), "image": img})
	}
	return out, nil
}

// imageName names a related image by its repository's last element and
// tag: k8s-device-plugin-v0.20.0, driver-595.91.07-ubuntu22.04.
func imageName(ref string) string {
	last := ref[strings.LastIndex(ref, "/")+1:]
	return strings.NewReplacer(":", "-", "@sha256", "", ".", "-").Replace(last)
}
