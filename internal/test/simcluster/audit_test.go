package simcluster

import (
	"strings"
	"testing"
	"time"
)

// A watch logged at ResponseStarted and ResponseComplete, a lease
// renewal, a status patch, and a request by another user that the policy
// would not have logged.
const auditSample = `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"w1","stage":"ResponseStarted","verb":"watch","user":{"username":"system:serviceaccount:gpu-operator:gpu-operator"},"objectRef":{"resource":"nodes","apiVersion":"v1"},"requestReceivedTimestamp":"2026-11-30T10:00:00.000000Z","stageTimestamp":"2026-11-30T10:00:00.001000Z"}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"l1","stage":"ResponseComplete","verb":"update","user":{"username":"system:serviceaccount:gpu-operator:gpu-operator"},"objectRef":{"resource":"leases","namespace":"gpu-operator","name":"gpu-operator.nvidia.com","apiGroup":"coordination.k8s.io","apiVersion":"v1"},"requestReceivedTimestamp":"2026-11-30T10:00:02.000000Z","stageTimestamp":"2026-11-30T10:00:02.001000Z"}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"s1","stage":"ResponseComplete","requestURI":"/apis/nvidia.com/v1/clusterpolicies/cluster-policy/status?fieldManager=gpu-operator","verb":"patch","user":{"username":"system:serviceaccount:gpu-operator:gpu-operator"},"objectRef":{"resource":"clusterpolicies","name":"cluster-policy","apiGroup":"nvidia.com","apiVersion":"v1","subresource":"status"},"requestReceivedTimestamp":"2026-11-30T10:00:01.000000Z","stageTimestamp":"2026-11-30T10:00:03.001000Z"}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"x1","stage":"ResponseComplete","verb":"patch","user":{"username":"kubernetes-admin"},"objectRef":{"resource":"nodes","name":"gpu-node-1","apiVersion":"v1"},"requestReceivedTimestamp":"2026-11-30T10:00:04.000000Z","stageTimestamp":"2026-11-30T10:00:04.001000Z"}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"w1","stage":"ResponseComplete","verb":"watch","user":{"username":"system:serviceaccount:gpu-operator:gpu-operator"},"objectRef":{"resource":"nodes","apiVersion":"v1"},"requestReceivedTimestamp":"2026-11-30T10:00:00.000000Z","stageTimestamp":"2026-11-30T10:09:00.000000Z"}
`

func TestParseAuditKeepsTheOperatorsRequestsOnceInOrder(t *testing.T) {
	reqs, err := ParseAudit(strings.NewReader(auditSample))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range reqs {
		got = append(got, r.At.Format("05")+" "+r.Verb+" "+r.Resource)
	}
	want := []string{"00 watch nodes", "01 patch clusterpolicies/status", "02 update leases"}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("requests = %q, want %q (one per audit ID, the operator's only, by time received)", got, want)
	}
	if r := reqs[2]; !r.Write() || !r.Lease() || r.Namespace != "gpu-operator" || r.Name != "gpu-operator.nvidia.com" {
		t.Errorf("lease renewal = %+v, Write %t, Lease %t", r, r.Write(), r.Lease())
	}
	if reqs[1].FieldManager != "gpu-operator" || reqs[0].FieldManager != "" {
		t.Errorf("field managers = %q, %q; want none for the watch, gpu-operator for the status patch", reqs[0].FieldManager, reqs[1].FieldManager)
	}
	if reqs[0].Write() || reqs[0].Lease() {
		t.Error("a watch counted as a write or a lease request")
	}
	if !reqs[1].At.Equal(time.Date(2026, 11, 30, 10, 0, 1, 0, time.UTC)) {
		t.Errorf("the status patch is at %v, when it was received", reqs[1].At)
	}
}

func TestParseAuditNamesTheBadLine(t *testing.T) {
	_, err := ParseAudit(strings.NewReader(auditSample[:strings.Index(auditSample, "\n")+1] + "{not json\n"))
	if err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("error = %v, want one naming line 2", err)
	}
}
