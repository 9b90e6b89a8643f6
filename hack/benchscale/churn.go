package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/gpu-operator/gpu-operator/internal/test/simcluster"
)

// flipEvery picks the nodes whose reports also change a condition: one in
// a hundred.
const flipEvery = 100

// churnPhase reports every node's status as kubelets do, which simulated
// nodes hardly do: the Ready condition's heartbeat of each node once per
// cfg.churnEvery (a kubelet's nodeStatusReportFrequency, 5 minutes by
// default), spread evenly, and on one node in a hundred a condition change
// as well (DiskPressure True on the first pass over the nodes, False on the
// next, and so on). It returns the window, for the audit count, and fills
// the churn figures.
func churnPhase(ctx context.Context, cfg config, s *simcluster.Cluster, names []string, op *simcluster.Operator, r *Result) (window, error) {
	progress(cfg.log, "kubelet churn: every node reports its status once per %s, for %s", cfg.churnEvery, cfg.churn)
	before, err := processUsage(op.Pid())
	if err != nil {
		return window{}, err
	}
	start := time.Now()
	end := start.Add(cfg.churn)
	cfg.cpuProfiles.save(ctx, cfg.log, cfg.ws.listen().Pprof, cfg.ws.profiles(), "cpu-churn.pprof", int(cfg.churn.Seconds()))
	gap := cfg.churnEvery / time.Duration(len(names))
	tick := time.NewTicker(gap)
	defer tick.Stop()
	reports, i := 0, 0
	for now := start; now.Before(end); now = <-tick.C {
		if err := ctx.Err(); err != nil {
			return window{}, err
		}
		flip := i%flipEvery == 0
		// Each pass over the nodes turns the pressure the other way.
		pressure := corev1.ConditionTrue
		if (i/len(names))%2 == 1 {
			pressure = corev1.ConditionFalse
		}
		if err := reportStatus(ctx, s.Clientset, names[i%len(names)], now, flip, pressure); err != nil {
			return window{}, err
		}
		reports++
		i++
	}
	after, err := processUsage(op.Pid())
	if err != nil {
		return window{}, err
	}
	done := time.Now()
	minutes := done.Sub(start).Minutes()
	r.ChurnSeconds = done.Sub(start).Seconds()
	r.ChurnReports = reports
	r.ChurnCPUSecondsPerMinute = (after.CPUSeconds - before.CPUSeconds) / minutes
	progress(cfg.log, "%d status reports in %.0fs", reports, r.ChurnSeconds)
	return window{start, done}, nil
}

// reportStatus is one kubelet status report: the Ready condition's
// heartbeat, and DiskPressure set to pressure when flip says so. A strategic merge
// patch merges conditions by type, as the kubelet's own patches do.
func reportStatus(ctx context.Context, cs kubernetes.Interface, node string, now time.Time, flip bool, pressure corev1.ConditionStatus) error {
	hb := metav1.NewTime(now).UTC().Format(time.RFC3339)
	conds := fmt.Sprintf(`{"type":"Ready","lastHeartbeatTime":%q}`, hb)
	if flip {
		conds += fmt.Sprintf(`,{"type":"DiskPressure","status":%q,"reason":"KubeletHasDiskPressure","lastHeartbeatTime":%q,"lastTransitionTime":%q}`,
			pressure, hb, hb)
	}
	patch := fmt.Sprintf(`{"status":{"conditions":[%s]}}`, conds)
	if _, err := cs.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("reporting the status of node %s: %w", node, err)
	}
	return nil
}
