package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gpu-operator/gpu-operator/internal/test/simcluster"
)

// namespace is the operator's, where the chart installs it.
const namespace = simcluster.Namespace

// workspace is where a run keeps its clusters and profiles and which
// ports they listen on, apart from another run's (make bench-smoke beside
// make bench-scale) and from the demo's and the e2e processes'.
type workspace struct {
	// dir holds the cluster's state (sim/) and the profiles (profiles/).
	dir string
	// portOffset shifts the cluster's ports (SIM_PORT_OFFSET) and the
	// operator's.
	portOffset int
}

// listen is where the benchmarked operator serves: 18280-18282 shifted.
func (w workspace) listen() simcluster.Listen {
	at := func(port int) string { return fmt.Sprintf("127.0.0.1:%d", port+w.portOffset) }
	return simcluster.Listen{Metrics: at(18280), Probe: at(18281), Pprof: at(18282)}
}

func (w workspace) profiles() string { return filepath.Join(w.dir, "profiles") }

// startSim tears down any earlier cluster of this workspace and starts a
// fresh one with n GPU nodes; audit turns on the audit log of the
// operator's user.
func startSim(cfg config, n int, audit bool) (*simcluster.Cluster, error) {
	return simcluster.Up(simcluster.Options{
		Root: cfg.root, Dir: filepath.Join(cfg.ws.dir, "sim"), Nodes: n, AuditOperator: audit, Log: cfg.log,
		Env: []string{"SIM_PORT_OFFSET=" + strconv.Itoa(cfg.ws.portOffset)},
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
func startOperator(ctx context.Context, s *simcluster.Cluster, listen simcluster.Listen) (*simcluster.Operator, error) {
	args, env, err := s.ChartOperator()
	if err != nil {
		return nil, err
	}
	// BENCH_OPERATOR_GODEBUG reaches the operator alone: gctrace=1 there
	// logs its heap at every collection, a timeline of its memory.
	if v := os.Getenv("BENCH_OPERATOR_GODEBUG"); v != "" {
		env = append(env, "GODEBUG="+v)
	}
	// BENCH_OPERATOR_ARGS are flags after the chart's, which they
	// override: an experiment with a setting before the chart takes it.
	args = append(args, strings.Fields(os.Getenv("BENCH_OPERATOR_ARGS"))...)
	return s.StartOperator(ctx, simcluster.OperatorOptions{
		Name: "operator", Args: append(args, listen.Args()...), Env: env, ProbeAddr: listen.Probe, WaitLeader: true,
	})
}
