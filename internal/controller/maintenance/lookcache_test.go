package maintenance

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/metrics"
	"github.com/gpu-operator/gpu-operator/internal/migconfig"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/migmanager"
	"github.com/gpu-operator/gpu-operator/internal/state/registry"
	"github.com/gpu-operator/gpu-operator/internal/test/fixture"
	"github.com/gpu-operator/gpu-operator/internal/test/podindex"
)

// twin is one of two maintenance controllers that see the same cluster
// change alike: each its own fake API server, the same operand pods and
// the same clock.
type twin struct {
	c      client.Client
	r      *Reconciler
	events *events.FakeRecorder
	m      *metrics.Metrics
}

// Incremental looks decide as full ones (issue 54, item 1): two
// controllers, one keeping quiet nodes' judgements between looks, the
// other judging every node at every look, see the same random changes of
// a fleet (people's labels, cordons and approvals, Ready and unhealthy
// GPUs, driver pods replaced, gone and outdated by a new template, policy
// edits, MIG configurations, the clock moving on) and must write the same
// nodes, tell the same events, requeue alike and count the same tally.
// The run must have kept judgements, or it proves nothing.
func TestIncrementalLooksDecideAsFullOnes(t *testing.T) {
	for seed := range uint64(6) {
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) { lookAlike(t, seed, 70) })
	}
}

func lookAlike(t *testing.T, seed uint64, rounds int) {
	g := NewWithT(t)
	ctx := ctrl.LoggerInto(context.Background(), ctrl.Log)
	rnd := rand.New(rand.NewPCG(seed, 54))
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	graph, err := registry.Graph()
	g.Expect(err).NotTo(HaveOccurred())

	cp := driverPolicy(g)
	cp.Spec.Operator.Remediation.Enabled = true
	cp.Spec.Driver.UpgradePolicy.MaxUnavailable = ptr.To(intstr.FromInt32(2))
	cp.Spec.Driver.UpgradePolicy.MaxParallelUpgrades = ptr.To(int32(2))
	cp.Spec.MIGManager.Enabled = ptr.To(seed%2 == 0)
	configs := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: cp.Spec.MIGManager.ConfigMapName(), Namespace: fixture.Namespace},
		Data: map[string]string{migconfig.FileKey: migmanager.DefaultConfig}}
	const size = 6
	name := func(i int) string { return fmt.Sprintf("gpu-%d", i) }
	objs := []client.Object{cp, configs, newDriverDaemonSet()}
	var pods []corev1.Pod
	for i := range size {
		objs = append(objs, fleetNode(name(i)))
		pods = append(pods, *driverPodOf(name(i), "old", true), *operandPodOf(name(i), state.DevicePlugin, true))
	}
	made := 0
	live := podindex.NewLive(t, pods...)
	clock := func() time.Time { return now }
	twins := make([]*twin, 2)
	for i := range twins {
		copies := make([]client.Object, len(objs))
		for j, o := range objs {
			copies[j] = o.DeepCopyObject().(client.Object)
		}
		c := fakeAPI(copies...).Build()
		m, err := metrics.New(prometheus.NewRegistry())
		g.Expect(err).NotTo(HaveOccurred())
		rec := events.NewFakeRecorder(1000)
		// No full look comes to mend a judgement kept wrongly: the
		// clock moves on by more than any timeout here.
		tm := fixture.Timers()
		tm.MaintenanceFullLook = 1000 * time.Hour
		twins[i] = &twin{c: c, events: rec, m: m, r: &Reconciler{Client: c, APIReader: c, Pods: live.Index, Graph: graph,
			Namespace: fixture.Namespace, Recorder: rec, Metrics: m, Timers: tm, Now: clock}}
	}
	// The incremental controller lists the nodes as the cache holds
	// them, the same objects look after look: no look may change one.
	listed := newCachedNodes(twins[0].c)
	twins[0].r.Nodes = listed

	// edit changes node i alike in both servers.
	edit := func(i int, change func(*corev1.Node)) {
		for _, tw := range twins {
			n := &corev1.Node{}
			g.Expect(tw.c.Get(ctx, client.ObjectKey{Name: name(i)}, n)).To(Succeed())
			change(n)
			g.Expect(tw.c.Update(ctx, n)).To(Succeed())
		}
	}
	editPolicy := func(change func(*gpuv1.ClusterPolicy)) {
		for _, tw := range twins {
			p := &gpuv1.ClusterPolicy{}
			g.Expect(tw.c.Get(ctx, client.ObjectKey{Name: cp.Name}, p)).To(Succeed())
			change(p)
			p.Generation++
			g.Expect(tw.c.Update(ctx, p)).To(Succeed())
		}
	}
	template := "new"
	upgradeStates := []gpuv1.UpgradeState{"", gpuv1.UpgradeRequired, gpuv1.UpgradeDone, gpuv1.UpgradeFailed,
		gpuv1.UpgradeValidation, gpuv1.UpgradePodRestart, gpuv1.UpgradeDrainRequired}
	toggle := func(m map[string]string, key, value string) {
		if _, ok := m[key]; ok {
			delete(m, key)
		} else {
			m[key] = value
		}
	}
	relabel := func(i int) string {
		// As the upgrade would write it, with its time.
		st := upgradeStates[rnd.IntN(len(upgradeStates))]
		edit(i, func(n *corev1.Node) {
			n.Labels[gpuv1.LabelUpgradeState] = string(st)
			if n.Annotations == nil {
				n.Annotations = map[string]string{}
			}
			n.Annotations[AnnotationSince] = now.Format(time.RFC3339)
		})
		return name(i) + " relabelled " + string(st)
	}
	changes := []func(i int) string{
		func(int) string {
			now = now.Add(time.Duration(rnd.Int64N(int64(20 * time.Minute))))
			return "the clock moves on"
		},
		func(i int) string {
			hash := []string{"old", template}[rnd.IntN(2)]
			live.Put(driverPodOf(name(i), hash, rnd.IntN(4) > 0))
			return "driver pod of " + name(i) + " at " + hash
		},
		func(i int) string {
			live.Delete(driverPodOf(name(i), "", false))
			return "driver pod of " + name(i) + " gone"
		},
		func(int) string {
			template = fmt.Sprintf("v%d", rnd.IntN(1000))
			for _, tw := range twins {
				ds := newDriverDaemonSet()
				g.Expect(tw.c.Get(ctx, client.ObjectKeyFromObject(ds), ds)).To(Succeed())
				ds.Spec.Template.Annotations[render.AnnotationTemplateHash] = template
				g.Expect(tw.c.Update(ctx, ds)).To(Succeed())
			}
			return "a new driver template"
		},
		relabel, relabel, // people's relabelling, most often of all
		relabel,
		func(i int) string {
			edit(i, func(n *corev1.Node) { toggle(n.Labels, gpuv1.LabelUpgradeSkip, gpuv1.LabelTrue) })
			return name(i) + " skip toggled"
		},
		func(i int) string {
			edit(i, func(n *corev1.Node) {
				c := &n.Status.Conditions[0]
				c.Status = map[corev1.ConditionStatus]corev1.ConditionStatus{corev1.ConditionTrue: corev1.ConditionFalse,
					corev1.ConditionFalse: corev1.ConditionTrue}[c.Status]
			})
			return name(i) + " Ready toggled"
		},
		func(i int) string {
			edit(i, func(n *corev1.Node) { n.Spec.Unschedulable = !n.Spec.Unschedulable })
			return name(i) + " cordon toggled"
		},
		func(i int) string {
			// As the node controller says it from the device plugin.
			unhealthy := rnd.IntN(2) * 2
			usable := resource.MustParse(strconv.Itoa(8 - unhealthy))
			edit(i, func(n *corev1.Node) {
				n.Status.Allocatable["nvidia.com/gpu"] = usable
				if n.Annotations == nil {
					n.Annotations = map[string]string{}
				}
				n.Annotations[gpuv1.AnnotationUnhealthyGPUs] = strconv.Itoa(unhealthy)
			})
			return fmt.Sprintf("%s: %d GPUs unhealthy", name(i), unhealthy)
		},
		func(i int) string {
			// The operand pods a node's steps count and read: its device
			// plugin, its mig-manager, a GPU feature discovery pod after
			// the driver.
			st := []state.Name{state.DevicePlugin, state.MIGManager, state.GPUFeatureDiscovery}[rnd.IntN(3)]
			pod := operandPodOf(name(i), st, rnd.IntN(3) > 0)
			if rnd.IntN(3) == 0 {
				live.Delete(pod)
				return fmt.Sprintf("%s pod of %s gone", st, name(i))
			}
			live.Put(pod)
			return fmt.Sprintf("%s pod of %s changed", st, name(i))
		},
		func(int) string {
			// The MIG configurations' file broken and mended: nodes whose
			// configuration was refused may start.
			data := []string{migmanager.DefaultConfig, "version: v1\nmig-configs: {}\n", "not: [yaml"}[rnd.IntN(3)]
			for _, tw := range twins {
				cm := configs.DeepCopy()
				g.Expect(tw.c.Get(ctx, client.ObjectKeyFromObject(cm), cm)).To(Succeed())
				cm.Data[migconfig.FileKey] = data
				g.Expect(tw.c.Update(ctx, cm)).To(Succeed())
			}
			return fmt.Sprintf("the MIG configurations' file is %.20q", data)
		},
		func(i int) string {
			// Deleted and made again under its name: another UID.
			made++
			for _, tw := range twins {
				n := &corev1.Node{}
				g.Expect(tw.c.Get(ctx, client.ObjectKey{Name: name(i)}, n)).To(Succeed())
				g.Expect(tw.c.Delete(ctx, n)).To(Succeed())
				again := fleetNode(name(i))
				again.UID = types.UID(fmt.Sprintf("%s-%d", name(i), made))
				g.Expect(tw.c.Create(ctx, again)).To(Succeed())
			}
			return name(i) + " deleted and made again"
		},
		func(i int) string {
			edit(i, func(n *corev1.Node) { toggle(n.Annotations, gpuv1.AnnotationRemediationApproved, gpuv1.LabelTrue) })
			return name(i) + " repair approval toggled"
		},
		func(i int) string {
			edit(i, func(n *corev1.Node) { delete(n.Annotations, gpuv1.AnnotationMaintenanceWaiting) })
			return name(i) + " waiting reason removed"
		},
		func(i int) string {
			config := []string{"all-1g.18gb", "all-disabled", ""}[rnd.IntN(3)]
			edit(i, func(n *corev1.Node) {
				if config == "" {
					delete(n.Labels, gpuv1.LabelMIGConfig)
				} else {
					n.Labels[gpuv1.LabelMIGConfig] = config
				}
			})
			return name(i) + " MIG configuration " + config
		},
		func(i int) string {
			plugin := []gpuv1.StateValue{gpuv1.StateReady, gpuv1.StatePending}[rnd.IntN(2)]
			edit(i, func(n *corev1.Node) { n.Labels[gpuv1.StateLabel(string(state.DevicePlugin))] = string(plugin) })
			return name(i) + " device plugin " + string(plugin)
		},
		func(int) string {
			auto := rnd.IntN(2) == 0
			unavailable := []intstr.IntOrString{intstr.FromInt32(1), intstr.FromInt32(2), intstr.FromString("50%")}[rnd.IntN(3)]
			editPolicy(func(p *gpuv1.ClusterPolicy) {
				p.Spec.Driver.UpgradePolicy.AutoUpgrade = &auto
				p.Spec.Driver.UpgradePolicy.MaxUnavailable = &unavailable
			})
			return fmt.Sprintf("policy: autoUpgrade %v, maxUnavailable %s", auto, unavailable.String())
		},
		func(int) string {
			editPolicy(func(p *gpuv1.ClusterPolicy) {
				p.Spec.Operator.Remediation.Enabled = !p.Spec.Operator.Remediation.Enabled
			})
			return "policy: remediation toggled"
		},
	}

	var trail []string
	for round := range rounds {
		// Quiet stretches, where the cache is used, between changes.
		for range rnd.IntN(3) {
			change := changes[rnd.IntN(len(changes))]
			trail = append(trail, change(rnd.IntN(size)))
		}
		for look := range 1 + rnd.IntN(3) {
			var results [2]ctrl.Result
			// The other judges every node at every look, as before the
			// look cache.
			twins[1].r.looks = lookCache{}
			for i, tw := range twins {
				results[i], err = tw.r.Reconcile(ctx, ctrl.Request{})
				g.Expect(err).NotTo(HaveOccurred())
			}
			where := fmt.Sprintf("round %d, look %d, after: %v", round, look, trail[max(0, len(trail)-6):])
			g.Expect(listed.copies.Changed()).To(Succeed(), where)
			g.Expect(results[0]).To(Equal(results[1]), "the requeue, %s", where)
			g.Expect(nodesOf(ctx, g, twins[0].c)).To(Equal(nodesOf(ctx, g, twins[1].c)), "the nodes, %s", where)
			g.Expect(drain(twins[0].events)).To(Equal(drain(twins[1].events)), "the events, %s", where)
			for _, gauge := range []func(*metrics.Metrics) prometheus.Gauge{
				func(m *metrics.Metrics) prometheus.Gauge { return m.UpgradesPending },
				func(m *metrics.Metrics) prometheus.Gauge { return m.UpgradesInProgress },
				func(m *metrics.Metrics) prometheus.Gauge { return m.UpgradesDone },
				func(m *metrics.Metrics) prometheus.Gauge { return m.UpgradesFailed },
				func(m *metrics.Metrics) prometheus.Gauge { return m.UpgradesAvailable },
			} {
				g.Expect(testutil.ToFloat64(gauge(twins[0].m))).To(Equal(testutil.ToFloat64(gauge(twins[1].m))), "the tally, %s", where)
			}
		}
	}
	g.Expect(twins[0].r.looks.reused).To(BeNumerically(">", rounds), "the incremental controller kept judgements")
	g.Expect(twins[1].r.looks.reused).To(BeZero(), "the other judged every node at every look")
	t.Logf("%d judgements kept over %d rounds", twins[0].r.looks.reused, rounds)
}

// fleetNode is a node of the twins' fleet as it starts: its driver and
// device plugin ready, eight GPUs healthy, mig-manager deployed.
func fleetNode(name string) *corev1.Node {
	n := gpuNode(name, map[string]string{
		gpuv1.StateLabel(string(state.Driver)):       string(gpuv1.StateReady),
		gpuv1.StateLabel(string(state.DevicePlugin)): string(gpuv1.StateReady),
		gpuv1.DeployLabel(string(state.MIGManager)):  gpuv1.LabelTrue,
	}, nil)
	n.UID = types.UID(name)
	gpus := resource.MustParse("8")
	n.Status.Capacity = corev1.ResourceList{"nvidia.com/gpu": gpus}
	n.Status.Allocatable = corev1.ResourceList{"nvidia.com/gpu": gpus}
	return n
}

// operandPodOf is an operand pod of a state on node, ready or not.
func operandPodOf(node string, st state.Name, ready bool) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: string(st) + "-" + node, Namespace: fixture.Namespace,
		UID:    types.UID("uid-" + string(st) + "-" + node),
		Labels: map[string]string{render.LabelState: string(st), render.LabelManagedBy: render.ManagedBy}},
		Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	if ready {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(time.Date(2026, 12, 7, 11, 0, 0, 0, time.UTC))}}
	}
	return p
}

// driverPodOf is node's driver pod at a template hash, ready or not.
func driverPodOf(node, hash string, ready bool) *corev1.Pod {
	p := outdatedDriver(node)
	p.Annotations[render.AnnotationTemplateHash] = hash
	if ready {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(time.Date(2026, 12, 7, 11, 0, 0, 0, time.UTC))}}
	}
	return p
}

// nodesOf is what the controllers write of each node, by name.
func nodesOf(ctx context.Context, g Gomega, c client.Client) map[string]corev1.Node {
	list := &corev1.NodeList{}
	g.Expect(c.List(ctx, list)).To(Succeed())
	out := map[string]corev1.Node{}
	for _, n := range list.Items {
		out[n.Name] = corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: n.Labels, Annotations: n.Annotations}, Spec: n.Spec}
	}
	return out
}

// drain is the events a recorder holds, in order of their text: the nodes
// step side by side.
func drain(rec *events.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			slices.Sort(out)
			return out
		}
	}
}

// The safety net under the kept judgements: every Timers.MaintenanceFullLook,
// and at any change of what the pass reads beside the nodes (here the
// policy's spec), a look judges every node again.
func TestAFullLookComesAfterItsTimeAndAtAPolicyChange(t *testing.T) {
	g := NewWithT(t)
	cp := driverPolicy(g)
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	pass := func(cp *gpuv1.ClusterPolicy) *pass {
		return &pass{cp: cp, now: now, obs: &observed{hashes: map[string]string{"ds": "a"}, deleting: map[string]bool{}}}
	}
	c := &lookCache{}
	every := 5 * time.Minute
	g.Expect(c.begin(pass(cp), every)).To(BeTrue(), "the first look")
	c.keep(gpuNode("a", nil, nil), &kept{})
	now = now.Add(every - time.Second)
	g.Expect(c.begin(pass(cp.DeepCopy()), every)).To(BeFalse(), "the same inputs, read anew")
	g.Expect(c.nodes).To(HaveKey("a"))
	now = now.Add(time.Second)
	g.Expect(c.begin(pass(cp), every)).To(BeTrue(), "its time come")
	g.Expect(c.nodes).To(BeEmpty())
	edited := cp.DeepCopy()
	edited.Spec.Driver.UpgradePolicy.MaxParallelUpgrades = ptr.To(int32(7))
	g.Expect(c.begin(pass(edited), every)).To(BeTrue(), "the policy's spec changed")
	p := pass(edited)
	p.obs.hashes = map[string]string{"ds": "b"}
	g.Expect(c.begin(p, every)).To(BeTrue(), "a driver DaemonSet's template changed")
}
