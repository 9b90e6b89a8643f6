package simcluster

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// environ is the environment the cluster's scripts run with: this
// process's, SIM_DIR and KUBECONFIG naming the cluster, then Options.Env.
func (c *Cluster) environ() []string {
	env := append(os.Environ(), "SIM_DIR="+c.Dir, "KUBECONFIG="+c.Kubeconfig())
	return append(env, c.env...)
}

// command prepares a repository script or binary, named relative to
// Root, to run from Root against the cluster.
func (c *Cluster) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(c.Root, name), args...)
	cmd.Dir = c.Root
	cmd.Env = c.environ()
	return cmd
}

// Run runs a repository script or binary against the cluster and returns
// its standard output and error together, as a terminal would show them;
// they also go to the log as they come, so that a long script shows its
// progress. The error names the command; the output is the caller's to
// add, since the log may have shown it already.
func (c *Cluster) Run(name string, args ...string) (string, error) {
	var out bytes.Buffer
	cmd := c.command(name, args...)
	w := io.MultiWriter(&out, c.log)
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return out.String(), nil
}

// Output runs a repository script or binary against the cluster and
// returns its standard output alone: a token, a kubeconfig, rendered
// YAML, which a warning on standard error must not spoil. Standard error
// goes to the log and, on failure, into the error, since it says why.
func (c *Cluster) Output(name string, args ...string) (string, error) {
	var stderr bytes.Buffer
	cmd := c.command(name, args...)
	cmd.Stderr = io.MultiWriter(&stderr, c.log)
	out, err := cmd.Output()
	if err != nil {
		err = fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
		if stderr.Len() > 0 {
			err = fmt.Errorf("%w\n%s", err, stderr.String())
		}
		return string(out), err
	}
	return string(out), nil
}
