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

// Sources of NFD's requirements, at v0.19.0.
const (
	nfdRepo           = "kubernetes-sigs/node-feature-discovery@v0.19.0:"
	nfdWorker         = nfdRepo + "pkg/nfd-worker/nfd-worker.go"
	nfdWorkerMain     = nfdRepo + "cmd/nfd-worker/main.go"
	nfdMaster         = nfdRepo + "pkg/nfd-master/nfd-master.go"
	nfdMasterMain     = nfdRepo + "cmd/nfd-master/main.go"
	nfdGC             = nfdRepo + "pkg/nfd-gc/nfd-gc.go"
	nfdGCMain         = nfdRepo + "cmd/nfd-gc/main.go"
	nfdWorkerManifest = nfdRepo + "deployment/helm/node-feature-discovery/templates/worker.yaml"
	nfdMasterManifest = nfdRepo + "deployment/helm/node-feature-discovery/templates/master.yaml"
	nfdGCManifest     = nfdRepo + "deployment/helm/node-feature-discovery/templates/nfd-gc.yaml"
	nfdMemory         = nfdRepo + "source/memory/memory.go"
)

// nfdContract is checked against NFD's workloads; NFD runs on every node,
// not per variant, so its pods are taken from its render directly.
var nfdContract = []struct {
	workload string
	requirement
}{
	{nfd.WorkerName, requirement{source: nfdWorker + ":504-523 (/healthz on -port, registered after the first discovery); " +
		nfdWorkerMain + ":115 (-port defaults to 8080); " + nfdWorkerManifest + ":64-92",
		need:  "is live and ready by GET /healthz on its HTTP port",
		check: healthz("nfd-worker", "liveness", "readiness")}},
	{nfd.WorkerName, requirement{source: nfdWorkerMain + ":109 (-config defaults to /etc/kubernetes/node-feature-discovery/nfd-worker.conf)",
		need: "reads the operator's config where it looks by default", check: configAt("nfd-worker")}},
	{nfd.WorkerName, requirement{source: nfdMemory + ":146 (/host-proc/swaps); " + nfdWorkerManifest + ":132-181",
		need: "reads the host's swap, OS, kernel and PCI devices, read-only",
		check: all(hostMount("nfd-worker", mount{host: "/proc/swaps", at: "/host-proc/swaps", readOnly: true}),
			hostMount("nfd-worker", mount{host: "/etc/os-release", at: "/host-etc/os-release", readOnly: true}),
			hostMount("nfd-worker", mount{host: "/sys", at: "/host-sys", readOnly: true}),
			hostMount("nfd-worker", mount{host: "/boot", at: "/host-boot", readOnly: true}))}},
	{nfd.MasterName, requirement{source: nfdMaster + ":298-343 (/healthz on -port once its NodeFeature caches synced); " +
		nfdMasterMain + ":131 (-port defaults to 8080); " + nfdMasterManifest + ":62-106",
		need:  "is started, live and ready by GET /healthz on its HTTP port",
		check: healthz("nfd-master", "startup", "liveness", "readiness")}},
	{nfd.MasterName, requirement{source: nfdMasterMain + ":127 (-config defaults to /etc/kubernetes/node-feature-discovery/nfd-master.conf)",
		need: "reads the operator's config where it looks by default", check: configAt("nfd-master")}},
	{nfd.GCName, requirement{source: nfdGC + ":250-268 (/healthz on -port from its start); " +
		nfdGCMain + ":86 (-port defaults to 8080); " + nfdGCManifest + ":54-82",
		need:  "is live and ready by GET /healthz on its HTTP port",
		check: healthz("nfd-gc", "liveness", "readiness")}},
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

// nfdDroppedFlags are the flags v0.19.0 no longer defines: its components
// parse flags with flag.ExitOnError (cmd/nfd-*/main.go), so one of these
// stops the container before it serves anything.
var nfdDroppedFlags = []string{"grpc-health", "metrics"}

// healthz checks a component's probes GET /healthz on the port it serves
// it on, 8080, with no argument moving the port or naming a dropped flag.
func healthz(ctr string, kinds ...string) func(*podCase) error {
	checks := []func(*podCase) error{func(p *podCase) error {
		c, err := container(p, ctr)
		if err != nil {
			return err
		}
		for _, a := range append(slices.Clone(c.Command[1:]), c.Args...) {
			name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
			if name == "port" || slices.Contains(nfdDroppedFlags, name) {
				return fmt.Errorf("%s runs with argument %q", ctr, a)
			}
		}
		return nil
	}}
	for _, k := range kinds {
		checks = append(checks, probe(ctr, k, httpProbe("/healthz", 8080)))
	}
	return all(checks...)
}
