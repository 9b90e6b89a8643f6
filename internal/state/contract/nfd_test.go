package contract

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/nfd"
	"github.com/gpu-operator/gpu-operator/internal/state/registry"
	"github.com/gpu-operator/gpu-operator/internal/test/fixture"
)

// Sources of NFD's requirements, at v0.17.3.
const (
	nfdWorker         = "kubernetes-sigs/node-feature-discovery@v0.17.3:pkg/nfd-worker/nfd-worker.go"
	nfdWorkerMain     = "kubernetes-sigs/node-feature-discovery@v0.17.3:cmd/nfd-worker/main.go"
	nfdMasterMain     = "kubernetes-sigs/node-feature-discovery@v0.17.3:cmd/nfd-master/main.go"
	nfdWorkerManifest = "kubernetes-sigs/node-feature-discovery@v0.17.3:deployment/helm/node-feature-discovery/templates/worker.yaml"
	nfdMasterManifest = "kubernetes-sigs/node-feature-discovery@v0.17.3:deployment/base/master/master-deployment.yaml"
	nfdMemory         = "kubernetes-sigs/node-feature-discovery@v0.17.3:source/memory/memory.go"
)

// nfdContract is checked against NFD's workloads; NFD runs on every node,
// not per variant, so its pods are taken from its render directly.
var nfdContract = []struct {
	workload string
	requirement
}{
	{nfd.WorkerName, requirement{source: nfdWorker + " (gRPC health on -grpc-health, 8082, after the first discovery); " + nfdWorkerManifest,
		need:  "is live and ready by its gRPC health service",
		check: all(probe("nfd-worker", "liveness", grpcProbe(8082)), probe("nfd-worker", "readiness", grpcProbe(8082)))}},
	{nfd.WorkerName, requirement{source: nfdWorkerMain + " (-config defaults to /etc/kubernetes/node-feature-discovery/nfd-worker.conf)",
		need: "reads the operator's config where it looks by default", check: configAt("nfd-worker")}},
	{nfd.WorkerName, requirement{source: nfdMemory + " (/host-proc/swaps); " + nfdWorkerManifest,
		need: "reads the host's swap, OS, kernel and PCI devices, read-only",
		check: all(hostMount("nfd-worker", mount{host: "/proc/swaps", at: "/host-proc/swaps", readOnly: true}),
			hostMount("nfd-worker", mount{host: "/etc/os-release", at: "/host-etc/os-release", readOnly: true}),
			hostMount("nfd-worker", mount{host: "/sys", at: "/host-sys", readOnly: true}),
			hostMount("nfd-worker", mount{host: "/boot", at: "/host-boot", readOnly: true}))}},
	{nfd.MasterName, requirement{source: nfdMasterManifest, need: "is started, live and ready by its gRPC health service",
		check: all(probe("nfd-master", "startup", grpcProbe(8082)), probe("nfd-master", "readiness", grpcProbe(8082)))}},
	{nfd.MasterName, requirement{source: nfdMasterMain + " (-config defaults to /etc/kubernetes/node-feature-discovery/nfd-master.conf)",
		need: "reads the operator's config where it looks by default", check: configAt("nfd-master")}},
}

func TestNFDContract(t *testing.T) {
	graph, err := registry.Graph()
	if err != nil {
		t.Fatal(err)
	}
	s, _ := graph.Get(state.NodeFeatureDiscovery)
	for pname, cp := range policies(t) {
		objs, err := s.Operand.Render(state.RenderInput{Policy: cp, Namespace: fixture.Namespace})
		if err != nil {
			t.Fatal(err)
		}
		specs := map[string]*corev1.PodSpec{}
		for _, o := range objs {
			switch w := o.(type) {
			case *appsv1.DaemonSet:
				specs[w.Name] = &w.Spec.Template.Spec
			case *appsv1.Deployment:
				specs[w.Name] = &w.Spec.Template.Spec
			}
		}
		for _, r := range nfdContract {
			c := &podCase{policy: pname, workload: r.workload, pod: specs[r.workload], spec: &cp.Spec}
			if err := r.check(c); err != nil {
				t.Errorf("%s policy, %s: %s\n  needed by %s\n  %v", pname, r.workload, r.need, r.source, err)
			}
		}
	}
}

// configAt checks a component finds its config where it looks by default,
// with no argument moving it.
func configAt(ctr string) func(*podCase) error {
	return func(p *podCase) error {
		c, err := container(p, ctr)
		if err != nil {
			return err
		}
		for _, a := range append(slices.Clone(c.Command[1:]), c.Args...) {
			if strings.HasPrefix(strings.TrimLeft(a, "-"), "config") {
				return fmt.Errorf("%s runs with argument %q", ctr, a)
			}
		}
		for _, vm := range c.VolumeMounts {
			if v := volume(p, vm.Name); vm.MountPath == "/etc/kubernetes/node-feature-discovery" && v != nil && v.ConfigMap != nil {
				return nil
			}
		}
		return fmt.Errorf("no config at /etc/kubernetes/node-feature-discovery")
	}
}
