package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"time"
)

// operatorUser is the operator's ServiceAccount as the API server names it.
const operatorUser = "system:serviceaccount:gpu-operator:gpu-operator"

// auditPolicy logs the operator's requests, and nobody else's, once each
// (RequestReceived is omitted; a watch logs ResponseStarted and then
// ResponseComplete under one audit ID, which parseAudit merges).
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  users: ["` + operatorUser + `"]
- level: None
`

// request is one API request the operator sent.
type request struct {
	At        time.Time
	Verb      string
	Resource  string // resource[/subresource]
	Namespace string
	Name      string
}

func (r request) write() bool {
	switch r.Verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

// lease is a leader-election request: counted apart from real work.
func (r request) lease() bool { return r.Resource == "leases" }

// auditEvent is the part of an audit.k8s.io/v1 Event the benchmark reads.
type auditEvent struct {
	AuditID   string                    `json:"auditID"`
	Verb      string                    `json:"verb"`
	User      struct{ Username string } `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
	} `json:"objectRef"`
	RequestReceivedTimestamp time.Time `json:"requestReceivedTimestamp"`
}

// parseAudit reads an API server audit log (JSON lines) and returns the
// operator's requests, one per audit ID, by the time they were received.
func parseAudit(r io.Reader) ([]request, error) {
	seen := map[string]bool{}
	var out []request
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for line := 1; sc.Scan(); line++ {
		var ev auditEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return nil, fmt.Errorf("audit log line %d: %w", line, err)
		}
		if ev.User.Username != operatorUser || seen[ev.AuditID] {
			continue
		}
		seen[ev.AuditID] = true
		req := request{At: ev.RequestReceivedTimestamp, Verb: ev.Verb}
		if ev.ObjectRef != nil {
			req.Resource, req.Namespace, req.Name = ev.ObjectRef.Resource, ev.ObjectRef.Namespace, ev.ObjectRef.Name
			if ev.ObjectRef.Subresource != "" {
				req.Resource += "/" + ev.ObjectRef.Subresource
			}
		}
		out = append(out, req)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out, nil
}

func readAudit(path string) ([]request, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseAudit(f)
}

// Requests counts the operator's requests in a window.
type Requests struct {
	Writes      int `json:"writes"`
	Reads       int `json:"reads"`
	LeaseWrites int `json:"leaseWrites"`
	LeaseReads  int `json:"leaseReads"`
	// WritesBy counts the writes (leases apart) by "verb resource".
	WritesBy map[string]int `json:"writesBy,omitempty"`
	// ReadsBy counts the reads (leases apart) by "verb resource".
	ReadsBy map[string]int `json:"readsBy,omitempty"`
}

// countRequests counts the requests received in [from, to).
func countRequests(reqs []request, from, to time.Time) Requests {
	c := Requests{WritesBy: map[string]int{}, ReadsBy: map[string]int{}}
	for _, r := range reqs {
		if r.At.Before(from) || !r.At.Before(to) {
			continue
		}
		key := r.Verb + " " + r.Resource
		switch {
		case r.lease() && r.write():
			c.LeaseWrites++
		case r.lease():
			c.LeaseReads++
		case r.write():
			c.Writes++
			c.WritesBy[key]++
		default:
			c.Reads++
			c.ReadsBy[key]++
		}
	}
	return c
}

// lastWrite returns when the last write other than a lease renewal was
// received in [from, to), and false when there was none.
func lastWrite(reqs []request, from, to time.Time) (time.Time, bool) {
	var last time.Time
	found := false
	for _, r := range reqs {
		if r.write() && !r.lease() && !r.At.Before(from) && r.At.Before(to) {
			last, found = r.At, true
		}
	}
	return last, found
}
