package simcluster

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"sort"
	"time"
)

// OperatorUser is the operator's ServiceAccount as the API server names
// it in the audit log.
const OperatorUser = "system:serviceaccount:" + Namespace + ":" + ServiceAccount

// operatorAuditPolicy logs the operator's requests, and nobody else's,
// once each (RequestReceived is omitted; a watch logs ResponseStarted and
// then ResponseComplete under one audit ID, which ParseAudit merges).
const operatorAuditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  users: ["` + OperatorUser + `"]
- level: None
`

// Request is one API request the operator sent.
type Request struct {
	At        time.Time
	Verb      string
	Resource  string // resource[/subresource]
	Namespace string
	Name      string
	// FieldManager is the write's fieldManager parameter, which tells
	// the operator's controllers apart; empty when it sent none.
	FieldManager string
}

// Write reports whether the request changes what the API server stores.
func (r Request) Write() bool {
	switch r.Verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

// Lease reports whether the request is leader election's, which the
// operator sends whatever the cluster does: counted apart from real work.
func (r Request) Lease() bool { return r.Resource == "leases" }

// auditEvent is the part of an audit.k8s.io/v1 Event that Request holds.
type auditEvent struct {
	AuditID    string                    `json:"auditID"`
	RequestURI string                    `json:"requestURI"`
	Verb       string                    `json:"verb"`
	User       struct{ Username string } `json:"user"`
	ObjectRef  *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
	} `json:"objectRef"`
	RequestReceivedTimestamp time.Time `json:"requestReceivedTimestamp"`
}

// ParseAudit reads an API server audit log (JSON lines) and returns the
// operator's requests, one per audit ID, by the time they were received.
func ParseAudit(r io.Reader) ([]Request, error) {
	seen := map[string]bool{}
	var out []Request
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for line := 1; sc.Scan(); line++ {
		var ev auditEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return nil, fmt.Errorf("audit log line %d: %w", line, err)
		}
		if ev.User.Username != OperatorUser || seen[ev.AuditID] {
			continue
		}
		seen[ev.AuditID] = true
		req := Request{At: ev.RequestReceivedTimestamp, Verb: ev.Verb, FieldManager: fieldManager(ev.RequestURI)}
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

// fieldManager is the fieldManager parameter of a request URI; empty when
// it has none or cannot be parsed (the count then lumps it with others).
func fieldManager(requestURI string) string {
	u, err := url.ParseRequestURI(requestURI)
	if err != nil {
		return ""
	}
	return u.Query().Get("fieldManager")
}

// ReadAudit parses the audit log at path (see ParseAudit).
func ReadAudit(path string) ([]Request, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParseAudit(f)
}
