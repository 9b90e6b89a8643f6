package simcluster

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// Namespace is where the chart installs the operator.
	Namespace = "gpu-operator"
	// ServiceAccount is the operator's, whose RBAC the chart grants.
	ServiceAccount = "gpu-operator"
	// LeaseName is the operator's leader election lease, in Namespace.
	LeaseName = "gpu-operator.nvidia.com"
	// operatorStartTimeout bounds how long StartOperator waits for what
	// OperatorOptions ask.
	operatorStartTimeout = 2 * time.Minute
)

// OperatorOptions say how to run one operator process.
type OperatorOptions struct {
	// Name names its log, logs/NAME.log (appended to, so that a restarted
	// operator's log follows the killed one's); "operator" when empty.
	Name string
	// Args are its flags.
	Args []string
	// Env is added to this process's environment, before KUBECONFIG and
	// OPERATOR_NAMESPACE, which StartOperator sets.
	Env []string
	// ProbeAddr is where it serves /readyz (host:port); WaitReady and
	// WaitLeader need it.
	ProbeAddr string
	// WaitReady makes StartOperator return once /readyz answers 200: a
	// follower waiting for the lease is ready, too.
	WaitReady bool
	// WaitLeader makes StartOperator return once it is ready and some
	// process holds the leader lease: the operator is then acting.
	WaitLeader bool
}

// Operator is an operator process, run locally as its ServiceAccount.
type Operator struct {
	// Log is the path of its log.
	Log  string
	cmd  *exec.Cmd
	done chan struct{}
}

// StartOperator starts bin/gpu-operator as the operator's ServiceAccount,
// with a token kubeconfig, so that the chart's RBAC is what it gets, as in
// a real install; it returns when the process started, or when it is as
// far as opts asks.
func (c *Cluster) StartOperator(ctx context.Context, opts OperatorOptions) (*Operator, error) {
	if opts.Name == "" {
		opts.Name = "operator"
	}
	token, err := c.Output("bin/kubectl", "create", "token", "-n", Namespace, ServiceAccount, "--duration=24h")
	if err != nil {
		return nil, err
	}
	cfg, err := c.Output("hack/sim/token-kubeconfig.sh", strings.TrimSpace(token), Namespace)
	if err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(c.Dir, "operator.kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	op := &Operator{Log: c.LogFile(opts.Name), done: make(chan struct{})}
	logFile, err := os.OpenFile(op.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	op.cmd = exec.Command(filepath.Join(c.Root, "bin", "gpu-operator"), opts.Args...)
	op.cmd.Dir = c.Root
	op.cmd.Env = append(append(os.Environ(), opts.Env...), "KUBECONFIG="+kubeconfig, "OPERATOR_NAMESPACE="+Namespace)
	op.cmd.Stdout, op.cmd.Stderr = logFile, logFile
	if err := op.cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting the operator: %w", err)
	}
	go func() { _ = op.cmd.Wait(); logFile.Close(); close(op.done) }()
	if !opts.WaitReady && !opts.WaitLeader {
		return op, nil
	}
	if err := c.waitOperator(ctx, op, opts); err != nil {
		op.Kill()
		return nil, err
	}
	return op, nil
}

// waitOperator waits until the operator serves /readyz and, with
// WaitLeader, until some process holds the lease.
func (c *Cluster) waitOperator(ctx context.Context, op *Operator, opts OperatorOptions) error {
	if opts.ProbeAddr == "" {
		return errors.New("waiting for the operator needs its ProbeAddr")
	}
	return Poll(ctx, operatorStartTimeout, 200*time.Millisecond, func() (bool, string, error) {
		select {
		case <-op.done:
			return false, "operator exited; see " + op.Log, fmt.Errorf("operator exited")
		default:
		}
		resp, err := http.Get("http://" + opts.ProbeAddr + "/readyz")
		if err != nil {
			return false, "operator not serving /readyz", nil
		}
		resp.Body.Close()
		if !opts.WaitLeader {
			return resp.StatusCode == http.StatusOK, "operator /readyz: " + resp.Status, nil
		}
		lease, err := c.Clientset.CoordinationV1().Leases(Namespace).Get(ctx, LeaseName, metav1.GetOptions{})
		if err != nil || lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
			return false, "operator not yet leader", nil
		}
		return resp.StatusCode == http.StatusOK, "operator /readyz: " + resp.Status, nil
	})
}

// Pid is the process's id, for reading its CPU time and memory in /proc.
func (o *Operator) Pid() int { return o.cmd.Process.Pid }

// Exited is closed once the process has exited: a manager that cannot
// renew its lease exits by design, and whoever plays its Deployment
// starts it again.
func (o *Operator) Exited() <-chan struct{} { return o.done }

// Kill sends SIGKILL and waits for the process to be gone: no cleanup, no
// lease release, as in a crash. It does nothing on a nil Operator, so
// that a teardown need not know whether one was started.
func (o *Operator) Kill() {
	if o == nil {
		return
	}
	_ = o.cmd.Process.Kill()
	<-o.done
}
