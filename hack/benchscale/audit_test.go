package main

import (
	"strings"
	"testing"
	"time"

	"github.com/gpu-operator/gpu-operator/internal/test/simcluster"
)

// Lines in the API server's audit log format: a watch logged at
// ResponseStarted and ResponseComplete, a lease renewal, node patches,
// and a request by another user that the policy would not have logged.
const auditSample = `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"w1","stage":"ResponseStarted","verb":"watch","user":{"username":"system:serviceaccount:gpu-operator:gpu-operator"},"objectRef":{"resource":"nodes","apiVersion":"v1"},"requestReceivedTimestamp":"2026-11-30T10:00:00.000000Z","stageTimestamp":"2026-11-30T10:00:00.001000Z"}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"p1","stage":"ResponseComplete","requestURI":"/api/v1/nodes/gpu-node-0?fieldManager=gpu-operator-upgrade\u0026force=true","verb":"patch","user":{"username":"system:serviceaccount:gpu-operator:gpu-operator"},"objectRef":{"resource":"nodes","name":"gpu-node-0","apiVersion":"v1"},"requestReceivedTimestamp":"2026-11-30T10:00:01.000000Z","stageTimestamp":"2026-11-30T10:00:01.002000Z"}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"l1","stage":"ResponseComplete","verb":"update","user":{"username":"system:serviceaccount:gpu-operator:gpu-operator"},"objectRef":{"resource":"leases","namespace":"gpu-operator","name":"gpu-operator.nvidia.com","apiGroup":"coordination.k8s.io","apiVersion":"v1"},"requestReceivedTimestamp":"2026-11-30T10:00:02.000000Z","stageTimestamp":"2026-11-30T10:00:02.001000Z"}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"l2","stage":"ResponseComplete","verb":"get","user":{"username":"system:serviceaccount:gpu-operator:gpu-operator"},"objectRef":{"resource":"leases","namespace":"gpu-operator","name":"gpu-operator.nvidia.com","apiGroup":"coordination.k8s.io","apiVersion":"v1"},"requestReceivedTimestamp":"2026-11-30T10:00:02.500000Z","stageTimestamp":"2026-11-30T10:00:02.501000Z"}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"s1","stage":"ResponseComplete","verb":"patch","user":{"username":"system:serviceaccount:gpu-operator:gpu-operator"},"objectRef":{"resource":"clusterpolicies","name":"cluster-policy","apiGroup":"nvidia.com","apiVersion":"v1","subresource":"status"},"requestReceivedTimestamp":"2026-11-30T10:00:03.000000Z","stageTimestamp":"2026-11-30T10:00:03.001000Z"}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"x1","stage":"ResponseComplete","verb":"patch","user":{"username":"kubernetes-admin"},"objectRef":{"resource":"nodes","name":"gpu-node-1","apiVersion":"v1"},"requestReceivedTimestamp":"2026-11-30T10:00:04.000000Z","stageTimestamp":"2026-11-30T10:00:04.001000Z"}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"w1","stage":"ResponseComplete","verb":"watch","user":{"username":"system:serviceaccount:gpu-operator:gpu-operator"},"objectRef":{"resource":"nodes","apiVersion":"v1"},"requestReceivedTimestamp":"2026-11-30T10:00:00.000000Z","stageTimestamp":"2026-11-30T10:09:00.000000Z"}
`

func at(sec int) time.Time { return time.Date(2026, 11, 30, 10, 0, sec, 0, time.UTC) }

func TestCountRequestsSeparatesLeasesAndMergesWatchStages(t *testing.T) {
	reqs, err := simcluster.ParseAudit(strings.NewReader(auditSample))
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 5 {
		t.Fatalf("parsed %d requests, want 5 (one per audit ID of the operator): %+v", len(reqs), reqs)
	}
	got := countRequests(reqs, at(0), at(10))
	if got.Writes != 2 || got.Reads != 1 || got.LeaseWrites != 1 || got.LeaseReads != 1 {
		t.Errorf("counts = %+v, want 2 writes, 1 read, 1 lease write, 1 lease read", got)
	}
	if got.WritesBy["patch clusterpolicies/status"] != 1 || got.WritesBy["patch nodes"] != 1 {
		t.Errorf("writes by resource = %v", got.WritesBy)
	}
	if got.WritesByManager["gpu-operator-upgrade: patch nodes"] != 1 || got.WritesByManager["-: patch clusterpolicies/status"] != 1 {
		t.Errorf("writes by field manager = %v, want the node patch under gpu-operator-upgrade, the status patch under -", got.WritesByManager)
	}
	// The window is half-open: a request at its end belongs to the next.
	if got := countRequests(reqs, at(1), at(3)); got.Writes != 1 || got.Reads != 0 {
		t.Errorf("counts in [1s, 3s) = %+v, want the node patch only", got)
	}
}

func TestLastWriteIgnoresLeases(t *testing.T) {
	reqs, err := simcluster.ParseAudit(strings.NewReader(auditSample))
	if err != nil {
		t.Fatal(err)
	}
	last, ok := lastWrite(reqs, at(0), at(10))
	if !ok || !last.Equal(at(3)) {
		t.Errorf("last write = %v, %v; want the status patch at %v", last, ok, at(3))
	}
	if _, ok := lastWrite(reqs, at(2), at(3)); ok {
		t.Error("a lease renewal counted as the operator's last write")
	}
}

func TestByManagerSumsEachManagersWritesPerNode(t *testing.T) {
	c := Requests{WritesByManager: map[string]int{
		"gpu-operator-upgrade-state: patch nodes": 30, "gpu-operator: patch nodes": 10,
		"gpu-operator-upgrade: patch nodes": 10, "gpu-operator-upgrade-state: delete pods": 10,
	}}
	want := "gpu-operator-upgrade-state 4.0, gpu-operator 1.0, gpu-operator-upgrade 1.0"
	if got := byManager(c, 10); got != want {
		t.Errorf("byManager = %q, want %q (summed over verbs, largest first, ties by name)", got, want)
	}
	if got := byManager(Requests{}, 10); got != "-" {
		t.Errorf("byManager of no writes = %q, want -", got)
	}
}
