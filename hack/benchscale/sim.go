package main

import (
	"context"
	"io"
	"os"
	"path/filepath"

	"github.com/gpu-operator/gpu-operator/internal/test/simcluster"
)

// namespace is the operator's, where the chart installs it.
const namespace = simcluster.Namespace

// listen is where the benchmarked operator serves, apart from the demo's
// and e2e's ports.
var listen = simcluster.Listen{Metrics: "127.0.0.1:18280", Probe: "127.0.0.1:18281", Pprof: "127.0.0.1:18282"}

// startSim tears down any earlier benchmark cluster and starts a fresh one
// with n GPU nodes; audit turns on the audit log of the operator's user.
func startSim(root string, log io.Writer, n int, audit bool) (*simcluster.Cluster, error) {
	return simcluster.Up(simcluster.Options{
		Root: root, Dir: filepath.Join(root, "_output", "bench", "sim"), Nodes: n, AuditOperator: audit, Log: log,
		// The benchmark creates tens of thousands of pods; the simulated
		// API server runs without rate limits, so the client should not
		// add one.
		QPS: 2000, Burst: 4000,
	})
}

// installChart installs the chart as documented, except that the benchmark
// creates the ClusterPolicy itself, so that the rollout is timed from then.
func installChart(s *simcluster.Cluster) error {
	return s.InstallChart("clusterPolicy.create=false")
}

// startOperator runs the operator with the arguments and environment of
// the chart's Deployment, so that the operator measured is the one
// installed, and returns once it leads.
func startOperator(ctx context.Context, s *simcluster.Cluster) (*simcluster.Operator, error) {
	args, env, err := s.ChartOperator()
	if err != nil {
		return nil, err
	}
	// BENCH_OPERATOR_GODEBUG reaches the operator alone: gctrace=1 there
	// logs its heap at every collection, a timeline of its memory.
	if v := os.Getenv("BENCH_OPERATOR_GODEBUG"); v != "" {
		env = append(env, "GODEBUG="+v)
	}
	return s.StartOperator(ctx, simcluster.OperatorOptions{
		Name: "operator", Args: append(args, listen.Args()...), Env: env, ProbeAddr: listen.Probe, WaitLeader: true,
	})
}
