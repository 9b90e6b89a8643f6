package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
)

const (
	namespace = "gpu-operator"
	// Ports of the benchmarked operator, apart from the demo's and e2e's.
	operatorMetricsAddr = "127.0.0.1:18280"
	operatorProbeAddr   = "127.0.0.1:18281"
	leaseName           = "gpu-operator.nvidia.com"
)

// sim is one simulated cluster, started by hack/sim/up.sh.
type sim struct {
	root, dir string
	log       io.Writer
	cs        kubernetes.Interface
	c         client.Client
	cfg       *rest.Config
}

// script runs a repository script or binary against the cluster, its
// output going to the benchmark's log.
func (s *sim) script(env []string, name string, args ...string) error {
	cmd := exec.Command(filepath.Join(s.root, name), args...)
	cmd.Dir = s.root
	cmd.Env = append(append(os.Environ(), "SIM_DIR="+s.dir, "KUBECONFIG="+filepath.Join(s.dir, "kubeconfig")), env...)
	cmd.Stdout, cmd.Stderr = s.log, s.log
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return nil
}

// output runs a repository binary and returns its standard output.
func (s *sim) output(name string, args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(s.root, name), args...)
	cmd.Env = append(os.Environ(), "SIM_DIR="+s.dir, "KUBECONFIG="+filepath.Join(s.dir, "kubeconfig"))
	cmd.Stderr = s.log
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return string(out), nil
}

// startSim tears down any earlier benchmark cluster and starts a fresh one
// with n GPU nodes; audit turns on the audit log of the operator's user.
func startSim(root string, log io.Writer, n int, audit bool) (*sim, error) {
	s := &sim{root: root, dir: filepath.Join(root, "_output", "bench", "sim"), log: log}
	_ = s.script(nil, "hack/sim/down.sh")
	var env []string
	if audit {
		policy := filepath.Join(root, "_output", "bench", "audit-policy.yaml")
		if err := os.MkdirAll(filepath.Dir(policy), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(policy, []byte(auditPolicy), 0o644); err != nil {
			return nil, err
		}
		env = append(env, "SIM_AUDIT_POLICY="+policy)
	}
	if err := s.script(env, "hack/sim/up.sh", fmt.Sprint(n)); err != nil {
		s.stop()
		return nil, err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(s.dir, "kubeconfig"))
	if err != nil {
		return nil, err
	}
	// client-go caches TLS transports by certificate file path; every
	// cluster of the benchmark has a new CA at the same path, so the
	// certificates are loaded here and the paths forgotten.
	if err := rest.LoadTLSFiles(cfg); err != nil {
		return nil, err
	}
	cfg.CAFile, cfg.CertFile, cfg.KeyFile = "", "", ""
	// The benchmark creates tens of thousands of pods; the simulated API
	// server runs without rate limits, so the client should not add one.
	cfg.QPS, cfg.Burst = 2000, 4000
	s.cfg = cfg
	if s.cs, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := gpuv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if s.c, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *sim) stop() { _ = s.script(nil, "hack/sim/down.sh") }

func (s *sim) auditLog() string { return filepath.Join(s.dir, "audit.log") }

// installChart installs the chart as documented, except that the benchmark
// creates the ClusterPolicy itself, so that the rollout is timed from then.
func (s *sim) installChart() error {
	return s.script(nil, "bin/helm", "install", "gpu-operator", "deployments/gpu-operator", "-n", namespace,
		"--create-namespace", "--wait=false", "--set", "clusterPolicy.create=false")
}

// operator is the operator process, run as its ServiceAccount with the
// arguments and environment of the chart's Deployment.
type operator struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func (s *sim) startOperator(ctx context.Context) (*operator, error) {
	return s.startOperatorAt(ctx, "operator", operatorAddrs{operatorMetricsAddr, operatorProbeAddr, operatorPprofAddr}, true)
}

// operatorAddrs are where one operator process listens.
type operatorAddrs struct{ metrics, probe, pprof string }

// startOperatorAt starts an operator process logging to logs/NAME.log;
// with leader, it returns once some process holds the leader lease, else
// once this one serves /readyz (a follower).
func (s *sim) startOperatorAt(ctx context.Context, name string, addrs operatorAddrs, leader bool) (*operator, error) {
	token, err := s.output("bin/kubectl", "create", "token", "-n", namespace, "gpu-operator", "--duration=24h")
	if err != nil {
		return nil, err
	}
	cfg, err := s.output("hack/sim/token-kubeconfig.sh", strings.TrimSpace(token), namespace)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(s.dir, "operator.kubeconfig")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	logFile, err := os.OpenFile(filepath.Join(s.dir, "logs", name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	args, env, err := s.chartOperator()
	if err != nil {
		return nil, err
	}
	// Plain HTTP on loopback: the bench scrapes without a token, and the
	// chart's HTTPS filter costs one cached TokenReview a minute at most.
	args = append(args, "--metrics-bind-address="+addrs.metrics, "--metrics-secure=false",
		"--health-probe-bind-address="+addrs.probe, "--pprof-bind-address="+addrs.pprof)
	cmd := exec.Command(filepath.Join(s.root, "bin", "gpu-operator"), args...)
	cmd.Env = append(append(os.Environ(), env...), "KUBECONFIG="+path, "OPERATOR_NAMESPACE="+namespace)
	// BENCH_OPERATOR_GODEBUG reaches the operator alone: gctrace=1 there
	// logs its heap at every collection, a timeline of its memory.
	if v := os.Getenv("BENCH_OPERATOR_GODEBUG"); v != "" {
		cmd.Env = append(cmd.Env, "GODEBUG="+v)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	op := &operator{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); logFile.Close(); close(op.done) }()

	// Ready to act: serving /readyz and holding the lease.
	err = poll(ctx, 2*time.Minute, 200*time.Millisecond, func() (bool, string, error) {
		select {
		case <-op.done:
			return false, "operator exited; see " + filepath.Join(s.dir, "logs", name+".log"), fmt.Errorf("operator exited")
		default:
		}
		resp, err := http.Get("http://" + addrs.probe + "/readyz")
		if err != nil {
			return false, "operator not serving /readyz", nil
		}
		resp.Body.Close()
		if !leader {
			return resp.StatusCode == http.StatusOK, "operator /readyz: " + resp.Status, nil
		}
		lease, err := s.cs.CoordinationV1().Leases(namespace).Get(ctx, leaseName, metav1.GetOptions{})
		if err != nil || lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
			return false, "operator not yet leader", nil
		}
		return resp.StatusCode == http.StatusOK, "operator /readyz: " + resp.Status, nil
	})
	if err != nil {
		op.kill()
		return nil, err
	}
	return op, nil
}

// chartOperator returns the arguments and plain environment variables of
// the operator container the chart deploys by default, so that the operator
// measured is the one installed. Listen addresses are the benchmark's own.
func (s *sim) chartOperator() (args, env []string, err error) {
	out, err := s.output("bin/helm", "template", "gpu-operator", "deployments/gpu-operator", "-n", namespace,
		"--show-only", "templates/deployment.yaml")
	if err != nil {
		return nil, nil, err
	}
	var d appsv1.Deployment
	if err := yaml.Unmarshal([]byte(out), &d); err != nil {
		return nil, nil, fmt.Errorf("the chart's Deployment: %w", err)
	}
	if len(d.Spec.Template.Spec.Containers) == 0 {
		return nil, nil, fmt.Errorf("the chart's Deployment has no container")
	}
	c := d.Spec.Template.Spec.Containers[0]
	for _, a := range c.Args {
		if !strings.HasPrefix(a, "--metrics-") && !strings.HasPrefix(a, "--health-probe-bind-address") {
			args = append(args, a)
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			env = append(env, e.Name+"="+e.Value)
		}
	}
	return args, env, nil
}

func (o *operator) pid() int { return o.cmd.Process.Pid }

func (o *operator) kill() {
	_ = o.cmd.Process.Kill()
	<-o.done
}
