package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestClusterCPUReadsEveryProcessOfThePidsFile(t *testing.T) {
	dir := t.TempDir()
	// This test's own process, twice under one name (a name respawned):
	// the readings add up.
	pids := fmt.Sprintf("kwok %d\nkwok %d\n", os.Getpid(), os.Getpid())
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
	later := cpuByProcess{"kwok": got["kwok"] + 1.5, "etcd": 2}
	if d := later.since(got); d["kwok"] != 1.5 || d["etcd"] != 2 || d.total() != 3.5 {
		t.Errorf("since = %v, total %v; want kwok 1.5, etcd 2, total 3.5", d, d.total())
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
