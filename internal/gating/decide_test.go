package gating

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/registry"
)

var (
	now   = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	grace = 30 * time.Second
	// settle is the device plugin's settle time of these tests.
	settle = 30 * time.Second
	nfd    = map[string]string{
		"feature.node.kubernetes.io/pci-10de.present":             "true",
		"feature.node.kubernetes.io/system-os_release.ID":         "ubuntu",
		"feature.node.kubernetes.io/system-os_release.VERSION_ID": "22.04",
		// What GFD puts on the node through NFD.
		"nvidia.com/gpu.product": "NVIDIA-H200",
		"nvidia.com/gpu.count":   "8",
	}
)

const (
	drv = state.Driver
	tk  = state.ContainerToolkit
	dp  = state.DevicePlugin
	dcg = state.DCGMExporter
	gfd = state.GPUFeatureDiscovery
)

// node is a working GPU node found by NFD, with the given extra labels and
// annotations, booted as "boot-1": it runs containerd and advertises its
// GPUs, and GFD labelled it.
func node(labels, annotations map[string]string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-1", Labels: map[string]string{}, Annotations: annotations}}
	for k, v := range nfd {
		n.Labels[k] = v
	}
	for k, v := range labels {
		n.Labels[k] = v
	}
	n.Status.NodeInfo.BootID = "boot-1"
	n.Status.NodeInfo.ContainerRuntimeVersion = "containerd://1.7.27"
	n.Status.Allocatable = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}
	n.Status.Capacity = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}
	return n
}

// variantLabels are the labels of a node whose driver is the container's,
// on containerd.
func variantLabels(l map[string]string) map[string]string {
	out := map[string]string{gpuv1.LabelDriverRoot: "container", gpuv1.LabelContainerRuntime: "containerd"}
	for k, v := range l {
		out[k] = v
	}
	return out
}

// states returns state labels with the given values.
func states(values map[state.Name]gpuv1.StateValue) map[string]string {
	l := map[string]string{}
	for n, v := range values {
		l[gpuv1.StateLabel(string(n))] = string(v)
	}
	return l
}

func allStates(v gpuv1.StateValue) map[state.Name]gpuv1.StateValue {
	return map[state.Name]gpuv1.StateValue{drv: v, tk: v, dp: v, dcg: v, gfd: v}
}

func readyPod(uid string, since time.Time) *state.PodFacts {
	return &state.PodFacts{UID: types.UID(uid), Ready: true, Since: since, Current: true}
}

// readyNode is a node ready on every state, its pods ready since an hour,
// and those pods.
func readyNode() (*corev1.Node, map[state.Name]*state.PodFacts) {
	old := now.Add(-time.Hour)
	pods := map[state.Name]*state.PodFacts{
		drv: readyPod("d1", old), tk: readyPod("t1", old), dp: readyPod("p1", old),
		dcg: readyPod("e1", old), gfd: readyPod("g1", old),
	}
	return node(variantLabels(states(allStates(gpuv1.StateReady))), map[string]string{AnnotationBootID: "boot-1", AnnotationDriverPod: "d1"}), pods
}

func notReadyPod(since time.Time) *state.PodFacts {
	return &state.PodFacts{UID: "p", Since: since, Current: true}
}

func allEnabled() map[state.Name]bool {
	return map[state.Name]bool{state.NodeFeatureDiscovery: true, drv: true, tk: true, dp: true, dcg: true, gfd: true}
}

func decide(t *testing.T, n *corev1.Node, pods map[state.Name]*state.PodFacts, mutate ...func(*Input)) Result {
	t.Helper()
	g, err := registry.Graph()
	if err != nil {
		t.Fatal(err)
	}
	in := Input{Graph: g, Node: n, Policy: &gpuv1.ClusterPolicy{}, Enabled: allEnabled(), Pods: pods, Grace: grace, Now: now,
		HealthSettle: settle, GPUPodsRecheck: 20 * time.Second, DriverNeedsOS: true}
	for _, m := range mutate {
		m(&in)
	}
	return Decide(in)
}

func stateOf(r Result, n state.Name) string { return r.Labels[gpuv1.StateLabel(string(n))] }

func reasons(r Result) []string {
	var out []string
	for _, e := range r.Events {
		out = append(out, e.Reason)
	}
	return out
}

func TestDiscovery(t *testing.T) {
	tests := map[string]struct {
		labels  map[string]string
		noNFD   bool
		mutate  func(*Input)
		wantGPU bool
	}{
		"NFD found an NVIDIA device": {wantGPU: true},
		"user marked the node":       {noNFD: true, labels: map[string]string{gpuv1.LabelGPUPresent: "true"}, wantGPU: true},
		"user opted the node out":    {labels: map[string]string{gpuv1.LabelGPUPresent: "false"}},
		"no NVIDIA device":           {noNFD: true},
		"display class variant":      {noNFD: true, labels: map[string]string{"feature.node.kubernetes.io/pci-0300_10de.present": "true"}, wantGPU: true},
		"no active policy":           {mutate: func(in *Input) { in.Policy = nil }},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			n := node(tt.labels, nil)
			if tt.noNFD {
				delete(n.Labels, "feature.node.kubernetes.io/pci-10de.present")
			}
			var mutate []func(*Input)
			if tt.mutate != nil {
				mutate = append(mutate, tt.mutate)
			}
			r := decide(t, n, nil, mutate...)
			if !tt.wantGPU {
				g.Expect(r.Labels).To(BeEmpty(), "every operator label is to be removed")
				g.Expect(r.Annotations).To(BeEmpty())
				return
			}
			g.Expect(r.Labels).To(HaveKeyWithValue(gpuv1.LabelGPUPresent, "true"))
		})
	}
}

func TestNewGPUNode(t *testing.T) {
	g := NewWithT(t)
	r := decide(t, node(nil, nil), nil)
	g.Expect(r.Labels).To(Equal(map[string]string{
		"nvidia.com/gpu.present":                      "true",
		"nvidia.com/gpu.driver-root":                  "container",
		"nvidia.com/gpu.container-runtime":            "containerd",
		"nvidia.com/gpu.deploy.driver":                "true",
		"nvidia.com/gpu.deploy.container-toolkit":     "true",
		"nvidia.com/gpu.deploy.device-plugin":         "true",
		"nvidia.com/gpu.deploy.dcgm-exporter":         "true",
		"nvidia.com/gpu.deploy.gpu-feature-discovery": "true",
		"nvidia.com/gpu.state.driver":                 "pending",
		"nvidia.com/gpu.state.container-toolkit":      "pending",
		"nvidia.com/gpu.state.mig-manager":            "disabled",
		"nvidia.com/gpu.state.mps-control-daemon":     "disabled",
		"nvidia.com/gpu.state.device-plugin":          "pending",
		"nvidia.com/gpu.state.dra-driver":             "disabled",
		"nvidia.com/gpu.state.dcgm":                   "disabled",
		"nvidia.com/gpu.state.dcgm-exporter":          "pending",
		"nvidia.com/gpu.state.gpu-feature-discovery":  "pending",
		"nvidia.com/gpu.state.cuda-workload":          "disabled",
		"nvidia.com/gpu.allocation-mode":              "device-plugin",
	}))
	g.Expect(r.Annotations).To(Equal(map[string]string{
		AnnotationBootID:         "boot-1",
		AnnotationDiscoveredAt:   "2026-11-30T12:00:00Z",
		AnnotationFoundBy:        "nfd",
		AnnotationAllocationMode: "device-plugin",
	}))
	g.Expect(r.Events).To(BeEmpty())
}

func TestOptOut(t *testing.T) {
	tests := map[string]struct {
		labels     map[string]string
		enabled    func(map[state.Name]bool)
		pods       map[state.Name]*state.PodFacts
		want       map[state.Name]string
		wantDeploy map[string]string // deploy label -> value the operator applies ("" = not applied)
	}{
		"user's false is kept and the driver is disabled; the toolkit proceeds": {
			labels: map[string]string{gpuv1.DeployLabel("driver"): "false"},
			pods:   map[state.Name]*state.PodFacts{tk: readyPod("t", now.Add(-time.Minute))},
			want:   map[state.Name]string{drv: "disabled", tk: "ready", dp: "pending"},
			wantDeploy: map[string]string{
				gpuv1.DeployLabel("driver"): "", gpuv1.DeployLabel("container-toolkit"): "true",
			},
		},
		"pre-installed driver label": {
			labels:     map[string]string{gpuv1.DeployLabel("driver"): "pre-installed"},
			want:       map[state.Name]string{drv: "disabled", tk: "pending"},
			wantDeploy: map[string]string{gpuv1.DeployLabel("driver"): ""},
		},
		"operands=false disables everything and adds no deploy label": {
			labels: map[string]string{gpuv1.LabelDeployOperands: "false"},
			want:   map[state.Name]string{drv: "disabled", tk: "disabled", dp: "disabled", dcg: "disabled", gfd: "disabled"},
			wantDeploy: map[string]string{
				gpuv1.DeployLabel("driver"): "", gpuv1.DeployLabel("device-plugin"): "",
			},
		},
		"operator's own true is kept when a node opts out of operands": {
			labels:     map[string]string{gpuv1.LabelDeployOperands: "false", gpuv1.DeployLabel("driver"): "true"},
			want:       map[state.Name]string{drv: "disabled"},
			wantDeploy: map[string]string{gpuv1.DeployLabel("driver"): "true"},
		},
		"disabled in the policy": {
			enabled:    func(e map[state.Name]bool) { e[dcg] = false },
			pods:       map[state.Name]*state.PodFacts{drv: readyPod("d", now.Add(-time.Minute))},
			want:       map[state.Name]string{dcg: "disabled", drv: "ready", tk: "pending"},
			wantDeploy: map[string]string{gpuv1.DeployLabel("dcgm-exporter"): ""},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			r := decide(t, node(tt.labels, nil), tt.pods, func(in *Input) {
				if tt.enabled != nil {
					tt.enabled(in.Enabled)
				}
			})
			for s, v := range tt.want {
				g.Expect(stateOf(r, s)).To(Equal(v), "state %s", s)
			}
			for key, v := range tt.wantDeploy {
				if v == "" {
					g.Expect(r.Labels).NotTo(HaveKey(key))
				} else {
					g.Expect(r.Labels).To(HaveKeyWithValue(key, v))
				}
			}
		})
	}
}

func TestChainFormsInOrder(t *testing.T) {
	g := NewWithT(t)
	earlier := now.Add(-time.Minute)
	pods := map[state.Name]*state.PodFacts{
		drv: readyPod("d1", earlier),
		tk:  readyPod("t1", earlier),
		dp:  readyPod("p1", earlier),
		dcg: readyPod("e1", earlier),
		gfd: readyPod("g1", earlier),
	}
	r := decide(t, node(nil, map[string]string{AnnotationBootID: "boot-1"}), pods)
	for _, s := range []state.Name{drv, tk, dp, dcg, gfd} {
		g.Expect(stateOf(r, s)).To(Equal("ready"), "state %s", s)
	}
	g.Expect(r.BecameReady).To(BeTrue())
	g.Expect(reasons(r)).To(Equal([]string{"GPUStackReady"}))
	g.Expect(r.Annotations).To(HaveKeyWithValue(AnnotationDriverPod, "d1"))

	// Nothing changed: the same labels again, no event, no requeue.
	n := node(r.Labels, r.Annotations)
	again := decide(t, n, pods)
	g.Expect(again.Labels).To(Equal(r.Labels))
	g.Expect(again.Annotations).To(Equal(r.Annotations))
	g.Expect(again.Events).To(BeEmpty())
	g.Expect(again.BecameReady).To(BeFalse())
	g.Expect(again.RequeueAfter).To(BeZero())
}

func TestWaitsForPrerequisites(t *testing.T) {
	g := NewWithT(t)
	pods := map[state.Name]*state.PodFacts{drv: notReadyPod(now), tk: readyPod("t", now), dp: readyPod("p", now)}
	r := decide(t, node(nil, nil), pods)
	g.Expect(stateOf(r, drv)).To(Equal("pending"))
	g.Expect(stateOf(r, tk)).To(Equal("pending"), "the toolkit's first start waits for the driver, whose files its CDI spec names")
	g.Expect(r.Why).To(HaveKeyWithValue(tk, "waiting for driver"))
	g.Expect(stateOf(r, dp)).To(Equal("pending"), "the device plugin waits for the driver")
	g.Expect(r.Why).To(HaveKeyWithValue(dp, "waiting for driver"))
	g.Expect(r.Why).To(HaveKeyWithValue(drv, "its pod is not ready"))

	pods = map[state.Name]*state.PodFacts{drv: readyPod("d", now), tk: notReadyPod(now), dp: readyPod("p", now)}
	r = decide(t, node(nil, nil), pods)
	g.Expect(stateOf(r, dp)).To(Equal("pending"), "and for the toolkit")
	g.Expect(r.Why).To(HaveKeyWithValue(dp, "waiting for container-toolkit"))
}

// The toolkit starts after the driver but stays when the driver leaves:
// a ready toolkit keeps its state, and so its pod, through a driver that
// is not ready; one that is not ready yet waits for the driver again.
func TestToolkitStaysWhenTheDriverLeaves(t *testing.T) {
	g := NewWithT(t)
	old := now.Add(-time.Hour)
	labels := variantLabels(states(allStates(gpuv1.StateReady)))
	pods := map[state.Name]*state.PodFacts{drv: notReadyPod(now.Add(-time.Hour)), tk: readyPod("t1", old)}
	r := decide(t, node(labels, map[string]string{AnnotationBootID: "boot-1", AnnotationDriverPod: "d1"}), pods)
	g.Expect(stateOf(r, drv)).To(Equal("pending"), "its pod has been unready past the grace period")
	g.Expect(stateOf(r, tk)).To(Equal("ready"))
	g.Expect(stateOf(r, dp)).To(Equal("pending"))

	labels[gpuv1.StateLabel(string(tk))] = string(gpuv1.StatePending)
	r = decide(t, node(labels, map[string]string{AnnotationBootID: "boot-1", AnnotationDriverPod: "d1"}), pods)
	g.Expect(stateOf(r, tk)).To(Equal("pending"), "a toolkit not ready starts again after the driver")
	g.Expect(r.Why).To(HaveKeyWithValue(tk, "waiting for driver"))
}

func TestOutages(t *testing.T) {
	readyLabels := variantLabels(states(allStates(gpuv1.StateReady)))
	anns := map[string]string{AnnotationBootID: "boot-1", AnnotationDriverPod: "d1"}
	healthy := func() map[state.Name]*state.PodFacts {
		old := now.Add(-time.Hour)
		return map[state.Name]*state.PodFacts{
			drv: readyPod("d1", old), tk: readyPod("t1", old), dp: readyPod("p1", old),
			dcg: readyPod("e1", old), gfd: readyPod("g1", old),
		}
	}
	tests := map[string]struct {
		pods        func(map[state.Name]*state.PodFacts)
		annotations map[string]string
		want        map[state.Name]string
		wantEvents  []string
		wantRequeue time.Duration
		wantStale   []state.Name
	}{
		"short driver blip keeps the chain": {
			pods:        func(p map[state.Name]*state.PodFacts) { p[drv] = notReadyPod(now.Add(-10 * time.Second)) },
			want:        map[state.Name]string{drv: "ready", tk: "ready", gfd: "ready"},
			wantRequeue: 20 * time.Second,
		},
		"long driver outage resets everything after it, and not the toolkit": {
			pods:       func(p map[state.Name]*state.PodFacts) { p[drv] = notReadyPod(now.Add(-40 * time.Second)) },
			want:       map[state.Name]string{drv: "pending", tk: "ready", dp: "pending", dcg: "pending", gfd: "pending"},
			wantEvents: []string{"StateReset"},
		},
		"device plugin outage resets what comes after it, and restarts its pod": {
			pods:       func(p map[state.Name]*state.PodFacts) { p[dp] = notReadyPod(now.Add(-time.Minute)) },
			want:       map[state.Name]string{drv: "ready", tk: "ready", dp: "pending", dcg: "pending", gfd: "pending"},
			wantEvents: []string{"StateReset"},
			wantStale:  []state.Name{dp},
		},
		"crash-looping toolkit fails": {
			pods: func(p map[state.Name]*state.PodFacts) {
				p[tk] = &state.PodFacts{UID: "t1", Since: now, Current: true, Failure: "crash loop"}
			},
			want:       map[state.Name]string{drv: "ready", tk: "failed", dp: "pending"},
			wantEvents: []string{"StateFailed"},
		},
		"driver pod gone: the driver is being replaced": {
			pods:       func(p map[state.Name]*state.PodFacts) { delete(p, drv) },
			want:       map[state.Name]string{drv: "pending", tk: "ready", dp: "pending", gfd: "pending"},
			wantEvents: []string{"StateReset"},
		},
		"new driver pod ready behind the operator's back": {
			pods:       func(p map[state.Name]*state.PodFacts) { p[drv] = readyPod("d2", now.Add(-5*time.Second)) },
			want:       map[state.Name]string{drv: "pending", tk: "ready", dp: "pending"},
			wantEvents: []string{"StateReset"},
		},
		"toolkit pod briefly gone in a rolling update": {
			pods:        func(p map[state.Name]*state.PodFacts) { delete(p, tk) },
			want:        map[state.Name]string{tk: "ready", dp: "ready"},
			wantRequeue: grace,
		},
		"toolkit pod gone for longer than the grace period": {
			pods:        func(p map[state.Name]*state.PodFacts) { delete(p, tk) },
			annotations: map[string]string{AnnotationMissingSince: "container-toolkit=2026-11-30T11:59:00Z"},
			want:        map[state.Name]string{drv: "ready", tk: "pending", dp: "pending"},
			wantEvents:  []string{"StateReset"},
		},
		"outdated pod keeps a ready state during its rolling update": {
			pods: func(p map[state.Name]*state.PodFacts) { p[dp].Current = false },
			want: map[state.Name]string{dp: "ready", dcg: "ready"},
		},
		"pod ready since before its reset is stale": {
			annotations: map[string]string{AnnotationNotBefore: "gpu-feature-discovery=2026-11-30T11:59:50Z"},
			want:        map[state.Name]string{gfd: "pending", dcg: "ready"},
			wantRequeue: 20 * time.Second,
		},
		"stale pod past the grace period is deleted": {
			annotations: map[string]string{AnnotationNotBefore: "gpu-feature-discovery=2026-11-30T11:50:00Z"},
			want:        map[state.Name]string{gfd: "pending"},
			wantStale:   []state.Name{gfd},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			pods := healthy()
			if tt.pods != nil {
				tt.pods(pods)
			}
			a := map[string]string{}
			for k, v := range anns {
				a[k] = v
			}
			for k, v := range tt.annotations {
				a[k] = v
			}
			r := decide(t, node(readyLabels, a), pods)
			for s, v := range tt.want {
				g.Expect(stateOf(r, s)).To(Equal(v), "state %s", s)
			}
			g.Expect(reasons(r)).To(Equal(tt.wantEvents))
			g.Expect(r.RequeueAfter).To(Equal(tt.wantRequeue))
			g.Expect(r.StalePods).To(Equal(tt.wantStale))
		})
	}
}

func TestResetRecordsNotBefore(t *testing.T) {
	g := NewWithT(t)
	readyLabels := variantLabels(states(allStates(gpuv1.StateReady)))
	old := now.Add(-time.Hour)
	pods := map[state.Name]*state.PodFacts{drv: notReadyPod(now.Add(-time.Minute)), tk: readyPod("t1", old)}
	r := decide(t, node(readyLabels, map[string]string{AnnotationBootID: "boot-1"}), pods)
	g.Expect(r.Annotations).To(HaveKeyWithValue(AnnotationNotBefore,
		"dcgm-exporter=2026-11-30T12:00:00Z,device-plugin=2026-11-30T12:00:00Z,gpu-feature-discovery=2026-11-30T12:00:00Z"))

	// The old device plugin pod, ready since before the reset, does not
	// count once the driver is back: the plugin must restart first.
	n := node(r.Labels, r.Annotations)
	pods = map[state.Name]*state.PodFacts{drv: readyPod("d2", now.Add(time.Second)), tk: readyPod("t1", old), dp: readyPod("p1", old)}
	r = decide(t, n, pods, func(in *Input) { in.Now = now.Add(2 * time.Second) })
	g.Expect(stateOf(r, drv)).To(Equal("ready"))
	g.Expect(stateOf(r, tk)).To(Equal("ready"))
	g.Expect(stateOf(r, dp)).To(Equal("pending"))
	g.Expect(r.Why).To(HaveKeyWithValue(dp, msgStalePod))

	// A fresh plugin pod does.
	pods[dp] = readyPod("p2", now.Add(3*time.Second))
	r = decide(t, node(r.Labels, r.Annotations), pods, func(in *Input) { in.Now = now.Add(4 * time.Second) })
	g.Expect(stateOf(r, dp)).To(Equal("ready"))
	g.Expect(r.Annotations[AnnotationNotBefore]).NotTo(ContainSubstring("device-plugin"))
}

func TestReboot(t *testing.T) {
	g := NewWithT(t)
	labels := variantLabels(states(allStates(gpuv1.StateReady)))
	labels[gpuv1.StateLabel("dcgm-exporter")] = "disabled"
	old := now.Add(-time.Hour)
	pods := map[state.Name]*state.PodFacts{drv: readyPod("d1", old), tk: readyPod("t1", old)}
	n := node(labels, map[string]string{AnnotationBootID: "boot-0", AnnotationDriverPod: "d1"})
	r := decide(t, n, pods, func(in *Input) { in.Enabled[dcg] = false })

	g.Expect(r.Labels).To(HaveKeyWithValue(gpuv1.StateLabel("driver"), "pending"))
	g.Expect(r.Labels).To(HaveKeyWithValue(gpuv1.StateLabel("container-toolkit"), "pending"))
	g.Expect(r.Labels).To(HaveKeyWithValue(gpuv1.StateLabel("gpu-feature-discovery"), "pending"))
	g.Expect(r.Labels).To(HaveKeyWithValue(gpuv1.StateLabel("dcgm-exporter"), "disabled"))
	g.Expect(r.Annotations).To(HaveKeyWithValue(AnnotationBootID, "boot-1"))
	g.Expect(reasons(r)).To(Equal([]string{"NodeRebooted"}))
	g.Expect(r.RequeueAfter).To(Equal(grace), "waits for the pods to restart")

	// The driver container restarts after the reboot: the chain re-forms.
	pods[drv] = readyPod("d1", now.Add(10*time.Second))
	r = decide(t, node(r.Labels, r.Annotations), pods, func(in *Input) {
		in.Enabled[dcg] = false
		in.Now = now.Add(11 * time.Second)
	})
	g.Expect(stateOf(r, drv)).To(Equal("ready"))
	g.Expect(stateOf(r, tk)).To(Equal("pending"), "the toolkit pod has not restarted yet")
	g.Expect(stateOf(r, dp)).To(Equal("pending"))
	g.Expect(r.Events).To(BeEmpty())
	g.Expect(r.StalePods).To(BeEmpty(), "the kubelet has the grace period to report the toolkit's restart")
}

// After a reboot the kubelet restarts every pod in place. A toolkit pod
// that restarted before the driver was ready again raced it: it restarts
// once the driver is ready. One that restarted after counts as it is.
func TestRebootRestartsPodsThatRacedTheirPrerequisites(t *testing.T) {
	g := NewWithT(t)
	labels := variantLabels(states(allStates(gpuv1.StateReady)))
	old := now.Add(-time.Hour)
	pods := map[state.Name]*state.PodFacts{drv: readyPod("d1", old), tk: readyPod("t1", old)}
	r := decide(t, node(labels, map[string]string{AnnotationBootID: "boot-0", AnnotationDriverPod: "d1"}), pods)
	g.Expect(stateOf(r, drv)).To(Equal("pending"))

	// The toolkit's container restarts first; the driver's is still loading.
	pods = map[state.Name]*state.PodFacts{drv: notReadyPod(now.Add(time.Second)), tk: readyPod("t1", now.Add(2*time.Second))}
	at := func(d time.Duration) func(*Input) { return func(in *Input) { in.Now = now.Add(d) } }
	r = decide(t, node(r.Labels, r.Annotations), pods, at(3*time.Second))
	g.Expect(stateOf(r, tk)).To(Equal("pending"))

	loading := r

	// The driver is ready: the toolkit pod started before it did.
	pods[drv] = readyPod("d1", now.Add(10*time.Second))
	r = decide(t, node(r.Labels, r.Annotations), pods, at(11*time.Second))
	g.Expect(stateOf(r, drv)).To(Equal("ready"))
	g.Expect(stateOf(r, tk)).To(Equal("pending"))
	g.Expect(r.Why).To(HaveKeyWithValue(tk, msgStalePod))
	g.Expect(r.StalePods).To(Equal([]state.Name{tk}), "it will not restart by itself")
	g.Expect(r.Annotations[AnnotationNotBefore]).To(ContainSubstring("container-toolkit=2026-11-30T12:00:11Z"))

	// Should the deletion fail, the pod is still not taken: it is deleted
	// again past the grace period.
	again := decide(t, node(r.Labels, r.Annotations), pods, at(12*time.Second))
	g.Expect(stateOf(again, tk)).To(Equal("pending"))
	g.Expect(again.StalePods).To(BeEmpty())
	again = decide(t, node(r.Labels, r.Annotations), pods, at(11*time.Second+grace))
	g.Expect(again.StalePods).To(Equal([]state.Name{tk}))

	// The API's times have whole seconds: a restart in the second the
	// driver became ready in counts as after it.
	within := decide(t, node(loading.Labels, loading.Annotations), map[state.Name]*state.PodFacts{
		drv: readyPod("d1", now.Add(10*time.Second)), tk: readyPod("t1", now.Add(10*time.Second)),
	}, at(10*time.Second+500*time.Millisecond))
	g.Expect(stateOf(within, drv)).To(Equal("ready"))
	g.Expect(stateOf(within, tk)).To(Equal("ready"))
	g.Expect(within.StalePods).To(BeEmpty())

	// A toolkit pod that restarted after the driver was ready counts.
	pods[tk] = readyPod("t1", now.Add(12*time.Second))
	r = decide(t, node(r.Labels, r.Annotations), pods, at(13*time.Second))
	g.Expect(stateOf(r, tk)).To(Equal("ready"))
	g.Expect(r.StalePods).To(BeEmpty())
}

// A state never reset keeps the pod it has when the states before it
// become ready: a node taken over with its operands running loses none.
func TestNoResetRestartsNothing(t *testing.T) {
	g := NewWithT(t)
	old := now.Add(-time.Hour)
	pods := map[state.Name]*state.PodFacts{drv: readyPod("d1", old), tk: readyPod("t1", old)}
	r := decide(t, node(nil, nil), pods)
	g.Expect(stateOf(r, drv)).To(Equal("ready"))
	g.Expect(stateOf(r, tk)).To(Equal("ready"))
	g.Expect(r.Annotations).NotTo(HaveKey(AnnotationNotBefore))
}

func TestTimeMapRoundTrip(t *testing.T) {
	g := NewWithT(t)
	m := timeMap{tk: now, drv: now.Add(time.Second)}
	g.Expect(m.String()).To(Equal("container-toolkit=2026-11-30T12:00:00Z,driver=2026-11-30T12:00:01Z"))
	g.Expect(parseTimeMap(m.String())).To(Equal(m))
	g.Expect(parseTimeMap("garbage,driver=notatime")).To(BeEmpty())
}

// At the upgrade step that replaces the driver pod, the driver and every
// state after it are upgrading: their pods leave the node before the new
// driver loads. The toolkit, which does not use the driver, stays.
func TestDriverRestartStep(t *testing.T) {
	g := NewWithT(t)
	labels := variantLabels(states(allStates(gpuv1.StateReady)))
	labels[gpuv1.LabelUpgradeState] = string(gpuv1.UpgradePodRestart)
	old := now.Add(-time.Hour)
	pods := map[state.Name]*state.PodFacts{drv: readyPod("d1", old), tk: readyPod("t1", old)}
	r := decide(t, node(labels, map[string]string{AnnotationBootID: "boot-1", AnnotationDriverPod: "d1"}), pods)
	for _, s := range []state.Name{drv, dp, dcg, gfd} {
		g.Expect(stateOf(r, s)).To(Equal("upgrading"), "state %s", s)
	}
	g.Expect(stateOf(r, tk)).To(Equal("ready"), "the toolkit keeps the runtime configured")
	g.Expect(r.Events).To(BeEmpty(), "an upgrade step is no outage")

	// Once the upgrade moved on, the new driver pod makes the chain re-form.
	labels = r.Labels
	labels[gpuv1.LabelUpgradeState] = string(gpuv1.UpgradeValidation)
	pods = map[state.Name]*state.PodFacts{drv: readyPod("d2", now.Add(time.Second)), tk: readyPod("t1", old)}
	r = decide(t, node(labels, r.Annotations), pods, func(in *Input) { in.Now = now.Add(2 * time.Second) })
	g.Expect(stateOf(r, drv)).To(Equal("ready"))
	g.Expect(stateOf(r, tk)).To(Equal("ready"))
	g.Expect(stateOf(r, dp)).To(Equal("pending"))
	g.Expect(r.Annotations).To(HaveKeyWithValue(AnnotationDriverPod, "d2"))
}

// A repair's driver reload takes the upgrade's path: the driver and the
// states after it are upgrading, so their pods leave before the driver pod
// is replaced, and re-form in order after.
func TestRepairReloadsTheDriverAsAnUpgradeDoes(t *testing.T) {
	g := NewWithT(t)
	labels := variantLabels(states(allStates(gpuv1.StateReady)))
	labels[gpuv1.LabelRemediationState] = string(gpuv1.RemediationDriverReload)
	old := now.Add(-time.Hour)
	pods := map[state.Name]*state.PodFacts{drv: readyPod("d1", old), tk: readyPod("t1", old)}
	r := decide(t, node(labels, map[string]string{AnnotationBootID: "boot-1", AnnotationDriverPod: "d1"}), pods)
	for _, s := range []state.Name{drv, dp, dcg, gfd} {
		g.Expect(stateOf(r, s)).To(Equal("upgrading"), "state %s", s)
	}
	g.Expect(stateOf(r, tk)).To(Equal("ready"))

	// Any other step of a repair leaves the chain as it is.
	labels = variantLabels(states(allStates(gpuv1.StateReady)))
	labels[gpuv1.LabelRemediationState] = string(gpuv1.RemediationDevicePluginRestart)
	r = decide(t, node(labels, map[string]string{AnnotationBootID: "boot-1", AnnotationDriverPod: "d1"}), pods)
	g.Expect(stateOf(r, drv)).To(Equal("ready"))
}

// A node whose OS NFD has not labelled has no driver image: the driver
// fails there, saying why, and nothing else breaks.
func TestDriverWithoutOSLabels(t *testing.T) {
	g := NewWithT(t)
	n := node(nil, nil)
	delete(n.Labels, "feature.node.kubernetes.io/system-os_release.ID")
	r := decide(t, n, nil)
	g.Expect(stateOf(r, drv)).To(Equal("failed"))
	g.Expect(r.Events).To(ContainElement(HaveField("Message", ContainSubstring("its OS is unknown"))))

	// A digest names one image for every OS.
	r = decide(t, n, nil, func(in *Input) { in.DriverNeedsOS = false })
	g.Expect(stateOf(r, drv)).To(Equal("pending"))
}

// With the standalone DCGM host engine on, a node opted out of it runs no
// dcgm-exporter either: the exporter reads its node's engine through the
// node-local Service, which there has none. With the engine off, the
// exporter runs on its own engine, the opt-out aside.
func TestExporterFollowsItsHostEngine(t *testing.T) {
	g := NewWithT(t)
	dcgmOn := func(in *Input) { in.Enabled[state.DCGM] = true }
	n, pods := readyNode()
	n.Labels[gpuv1.DeployLabel(string(state.DCGM))] = "false"
	r := decide(t, n, pods, dcgmOn)
	g.Expect(stateOf(r, state.DCGM)).To(Equal("disabled"))
	g.Expect(stateOf(r, dcg)).To(Equal("disabled"))
	g.Expect(stateOf(r, gfd)).To(Equal("ready"), "GFD does not read the engine")
	g.Expect(stateOf(decide(t, n, pods), dcg)).To(Equal("ready"), "no host engine anywhere: the exporter embeds its own")
}
