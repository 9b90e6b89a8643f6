package simcluster

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// script writes an executable shell script named name under root.
func script(t *testing.T, root, name, body string) {
	t.Helper()
	path := filepath.Join(root, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

// Scripts run from the repository root with the cluster named in their
// environment, and Options.Env after it.
func TestRunGivesScriptsTheClustersEnvironment(t *testing.T) {
	root := t.TempDir()
	script(t, root, "hack/env.sh", `echo "$SIM_DIR $KUBECONFIG $SIM_NODE_KINDS $(pwd)"; echo warning >&2`)
	var log bytes.Buffer
	c := &Cluster{Root: root, Dir: "/sim", env: []string{"SIM_NODE_KINDS=crio"}, log: &log}
	out, err := c.Run("hack/env.sh")
	if err != nil {
		t.Fatal(err)
	}
	want := "/sim /sim/kubeconfig crio " + root + "\nwarning\n"
	if out != want || log.String() != want {
		t.Errorf("output %q, log %q; want both %q", out, log.String(), want)
	}
}

// Output keeps standard error out of what it returns, and puts it in the
// error of a failed command, where it says why.
func TestOutputSeparatesStandardError(t *testing.T) {
	root := t.TempDir()
	script(t, root, "ok.sh", `echo token; echo "a warning" >&2`)
	script(t, root, "fail.sh", `echo partial; echo "no such account" >&2; exit 3`)
	c := &Cluster{Root: root, Dir: root, log: &bytes.Buffer{}}
	if out, err := c.Output("ok.sh"); err != nil || out != "token\n" {
		t.Errorf("Output = %q, %v; want the token alone", out, err)
	}
	out, err := c.Output("fail.sh", "arg")
	if err == nil || !strings.Contains(err.Error(), "fail.sh arg: exit status 3") || !strings.Contains(err.Error(), "no such account") {
		t.Errorf("error = %v, want the command, its status and its standard error", err)
	}
	if out != "partial\n" {
		t.Errorf("output of the failed command = %q", out)
	}
	if _, err := c.Run("fail.sh"); err == nil || strings.Contains(err.Error(), "no such account") {
		t.Errorf("Run's error = %v, want the command alone: its output is returned", err)
	}
}
