package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

func TestClusterCPUReadsTheNamedProcessesOfThePidsFile(t *testing.T) {
	dir := t.TempDir()
	// This test's own process under a cluster name, under a name that is
	// not the cluster's (the benchmark's operator), and a pid that is gone.
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	pids := fmt.Sprintf("kwok %d\noperator %d\nsimagent %d\n", os.Getpid(), os.Getpid(), gone.Process.Pid)
	if err := os.WriteFile(filepath.Join(dir, "pids"), []byte(pids), 0o600); err != nil {
		t.Fatal(err)
	}
	// Some CPU time to read: the kernel counts it in 10 ms ticks.
	for start := time.Now(); time.Since(start) < 50*time.Millisecond; {
	}
	got, err := clusterCPU(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got["kwok"] <= 0 || len(got) != 1 {
		t.Errorf("clusterCPU = %v, want kwok's CPU time only", got)
	}
}

func TestClusterCPUCountsADescendantNotYetReaped(t *testing.T) {
	dir := t.TempDir()
	// A shell that keeps a busy child running, as pod-runner keeps its
	// kubectl watch: the child's time is the shell's too.
	sh := exec.Command("sh", "-c", "sh -c 'while :; do :; done' & wait")
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = exec.Command("pkill", "-P", fmt.Sprint(sh.Process.Pid)).Run()
		_ = sh.Process.Kill()
		_ = sh.Wait()
	})
	if err := os.WriteFile(filepath.Join(dir, "pids"), []byte(fmt.Sprintf("pod-runner %d\n", sh.Process.Pid)), 0o600); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		got, err := clusterCPU(dir)
		if err != nil {
			t.Fatal(err)
		}
		// The shell itself only waits: a tenth of a second is its child's.
		if got["pod-runner"] >= 0.1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod-runner's busy child not counted: %v after 20 s", got)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestClusterCPUNamesAPidsLineItCannotRead(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "pids"), []byte("etcd x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := clusterCPU(dir); err == nil {
		t.Error("clusterCPU read a pid that is not a number")
	}
}

func TestSinceAndTotal(t *testing.T) {
	earlier := cpuByProcess{"kwok": 0.25, "etcd": 1, "simagent": 3}
	later := cpuByProcess{"kwok": 1.75, "etcd": 3, "kube-apiserver": 9}
	d := later.since(earlier)
	// simagent is gone and kube-apiserver was not read before: neither has
	// a figure for the window.
	if len(d) != 2 || d["kwok"] != 1.5 || d["etcd"] != 2 || d.total() != 3.5 {
		t.Errorf("since = %v, total %v; want kwok 1.5, etcd 2, total 3.5", d, d.total())
	}
}
