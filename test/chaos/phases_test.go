//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/test/simcluster"
)

// chaosPhase is one fault scenario; the fleet must converge after it,
// within limit (convergeLimit if 0).
type chaosPhase struct {
	name, faults string
	run          func(ctx context.Context) error
	limit        time.Duration
}

// Driver versions the phases move the fleet through, in order.
var chaosVersions = []gpuv1.DriverVersion{"550.54.15", "570.172.08", "575.57.08", "580.82.07", "580.95.05", "590.44.01", "590.48.01", "595.45.04"}

// phases are the faults of issue 12, in an order that leaves each on a
// converged fleet.
func (r *chaosRun) phases(kills int) []chaosPhase {
	return []chaosPhase{
		{name: "rollout", faults: fmt.Sprintf("%d operator SIGKILLs during the first rollout", kills), run: func(ctx context.Context) error {
			if err := r.s.Client.Create(ctx, policy(r.opts.nodes)); err != nil {
				return err
			}
			return r.killOperator(ctx, kills)
		}},
		{name: "upgrade", faults: fmt.Sprintf("%d operator SIGKILLs during a driver upgrade", kills), run: func(ctx context.Context) error {
			if err := r.upgradeTo(ctx, chaosVersions[0]); err != nil {
				return err
			}
			return r.killOperator(ctx, kills)
		}},
		{name: "failover", faults: "two replicas; the leader SIGKILLed mid-upgrade", run: r.failover},
		{name: "policy deleted", faults: "ClusterPolicy deleted mid-upgrade and created again; kube-apiserver, then etcd, restarted mid-rollout",
			run: r.policyDeleted},
		{name: "429s", faults: "the API server refusing what exceeds 20 requests in flight for a minute, during a rolling update", run: r.refusing},
		{name: "churn", faults: "nodes deleted and added, a state label removed, a DaemonSet edited, a node cordoned and uncordoned, " +
			"the version changed twice, all mid-upgrade", run: r.churn},
		{name: "allocation mode", faults: fmt.Sprintf("the fleet moved to DRA (its nvidia.com/gpu workload scaled to 0, a claim "+
			"workload started), turned round to the device plugin mid-switch and sent on to DRA again; %d operator SIGKILLs", kills/2),
			run: func(ctx context.Context) error { return r.switchModes(ctx, kills/2) }},
		{name: "allocation mode back", faults: "the fleet moved back to the device plugin, the claim workload evicted; " +
			"the nvidia.com/gpu workload scaled back", run: r.switchBack},
		// Three operations' work within shared budgets: the upgrade alone
		// takes about half the time.
		{name: "maintenance", faults: fmt.Sprintf("repairs (plugin restart, reload, reboot), MIG reconfigurations and a driver upgrade "+
			"at once, within %s each and %d NVLink domains; %d operator SIGKILLs; the version changed mid-flight", maintenanceBudget, domainCap, kills/2),
			run: func(ctx context.Context) error { return r.maintenance(ctx, kills/2) }, limit: maintenanceLimit},
	}
}

func (r *chaosRun) upgradeTo(ctx context.Context, v gpuv1.DriverVersion) error {
	r.version = v
	return r.setVersion(ctx, v)
}

// failover runs a second operator, starts an upgrade, kills the leader
// once a node evicts its GPU pods, and times the follower's takeover.
func (r *chaosRun) failover(ctx context.Context) error {
	follower, err := r.startOperator(ctx, "operator-2", followerListen, false)
	if err != nil {
		return err
	}
	if err := r.upgradeTo(ctx, chaosVersions[1]); err != nil {
		follower.Kill()
		return err
	}
	if err := r.waitInUpgrade(ctx, gpuv1.UpgradePodDeletion); err != nil {
		follower.Kill()
		return err
	}
	lease, err := r.s.Clientset.CoordinationV1().Leases(namespace).Get(ctx, simcluster.LeaseName, metav1.GetOptions{})
	if err != nil {
		follower.Kill()
		return err
	}
	holder := *lease.Spec.HolderIdentity
	killed := time.Now()
	r.op.Kill()
	r.op = follower
	err = simcluster.Poll(ctx, 2*time.Minute, 100*time.Millisecond, func() (bool, string, error) {
		l, err := r.s.Clientset.CoordinationV1().Leases(namespace).Get(ctx, simcluster.LeaseName, metav1.GetOptions{})
		if err != nil {
			return false, "reading the lease", nil
		}
		return l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != holder, "the follower has not taken the lease", nil
	})
	r.res.FailoverSeconds = time.Since(killed).Seconds()
	return err
}

// policyDeleted deletes the policy mid-upgrade, waits for the uninstall to
// finish, creates it again, and restarts the API server and then etcd
// while that rollout runs.
func (r *chaosRun) policyDeleted(ctx context.Context) error {
	if err := r.upgradeTo(ctx, chaosVersions[2]); err != nil {
		return err
	}
	if err := r.waitInUpgrade(ctx, ""); err != nil {
		return err
	}
	cp := &gpuv1.ClusterPolicy{}
	if err := r.s.Client.Get(ctx, keyOf(policyName), cp); err != nil {
		return err
	}
	if err := r.s.Client.Delete(ctx, cp); err != nil {
		return err
	}
	if err := simcluster.Poll(ctx, 5*time.Minute, time.Second, func() (bool, string, error) {
		err := r.s.Client.Get(ctx, keyOf(policyName), &gpuv1.ClusterPolicy{})
		return err != nil, "the deleted ClusterPolicy is still cleaning up", nil
	}); err != nil {
		return err
	}
	again := policy(r.opts.nodes)
	again.Spec.Driver.Version = r.version
	if err := r.s.Client.Create(ctx, again); err != nil {
		return err
	}
	r.sleep(ctx, 5*time.Second)
	if err := r.restartProcess(ctx, "kube-apiserver", 2*time.Second, nil); err != nil {
		return err
	}
	r.sleep(ctx, 5*time.Second)
	return r.restartProcess(ctx, "etcd", 2*time.Second, nil)
}

// refusing rolls every DaemonSet but the driver's (a new pod annotation)
// while the API server answers 429 to whatever exceeds its limits, for a
// minute.
func (r *chaosRun) refusing(ctx context.Context) error {
	if err := r.editPolicy(ctx, func(cp *gpuv1.ClusterPolicy) {
		cp.Spec.Daemonsets.Annotations = gpuv1.Annotations{"chaos.example.com/rolled": time.Now().Format("150405")}
	}); err != nil {
		return err
	}
	if err := r.restartProcess(ctx, "kube-apiserver", 0, inflight(20, 5)); err != nil {
		return err
	}
	r.sleep(ctx, time.Minute)
	return r.restartProcess(ctx, "kube-apiserver", 0, inflight(0, 0))
}

// churn changes everything at once during an upgrade.
func (r *chaosRun) churn(ctx context.Context) error {
	if err := r.upgradeTo(ctx, chaosVersions[3]); err != nil {
		return err
	}
	if err := r.waitInUpgrade(ctx, ""); err != nil {
		return err
	}
	// Two nodes go, two new ones come, marked like the others.
	gone := r.names[len(r.names)-2:]
	for _, n := range gone {
		if err := r.s.Clientset.CoreV1().Nodes().Delete(ctx, n, metav1.DeleteOptions{}); err != nil {
			return err
		}
	}
	r.names = r.names[:len(r.names)-2]
	for i := range 2 {
		name := fmt.Sprintf("gpu-node-chaos-%d", i)
		if err := r.addNode(ctx, r.names[i], name); err != nil {
			return err
		}
		r.names = append(r.names, name)
		if err := r.markNodes(ctx, []string{name}); err != nil {
			return err
		}
		if err := r.labelCliques(ctx, []string{name}); err != nil {
			return err
		}
	}
	// A user removes a state label, edits a DaemonSet, cordons a node.
	if err := r.editNode(ctx, r.names[0], func(n *corev1.Node) {
		delete(n.Labels, gpuv1.StateLabel("gpu-feature-discovery"))
	}); err != nil {
		return err
	}
	if err := r.editDaemonSetEnv(ctx, "nvidia-device-plugin-daemonset"); err != nil {
		return err
	}
	cordoned := r.names[1]
	if err := r.editNode(ctx, cordoned, func(n *corev1.Node) { n.Spec.Unschedulable = true }); err != nil {
		return err
	}
	r.sleep(ctx, 10*time.Second)
	if err := r.upgradeTo(ctx, chaosVersions[4]); err != nil {
		return err
	}
	if err := r.editNode(ctx, cordoned, func(n *corev1.Node) { n.Spec.Unschedulable = false }); err != nil {
		return err
	}
	r.sleep(ctx, 15*time.Second)
	return r.upgradeTo(ctx, chaosVersions[5])
}
