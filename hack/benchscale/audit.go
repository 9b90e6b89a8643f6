package main

import (
	"time"

	"github.com/gpu-operator/gpu-operator/internal/test/simcluster"
)

// Requests counts the operator's requests in a window.
type Requests struct {
	Writes      int `json:"writes"`
	Reads       int `json:"reads"`
	LeaseWrites int `json:"leaseWrites"`
	LeaseReads  int `json:"leaseReads"`
	// WritesBy counts the writes (leases apart) by "verb resource".
	WritesBy map[string]int `json:"writesBy,omitempty"`
	// WritesByManager counts the writes (leases apart) by "field manager:
	// verb resource", which tells the controllers apart (the node
	// controller's gpu-operator, the upgrade's gpu-operator-upgrade and
	// gpu-operator-upgrade-state, ...); "-" for writes that name none.
	WritesByManager map[string]int `json:"writesByManager,omitempty"`
	// ReadsBy counts the reads (leases apart) by "verb resource".
	ReadsBy map[string]int `json:"readsBy,omitempty"`
}

// countRequests counts the requests received in [from, to).
func countRequests(reqs []simcluster.Request, from, to time.Time) Requests {
	c := Requests{WritesBy: map[string]int{}, WritesByManager: map[string]int{}, ReadsBy: map[string]int{}}
	for _, r := range reqs {
		if r.At.Before(from) || !r.At.Before(to) {
			continue
		}
		key := r.Verb + " " + r.Resource
		switch {
		case r.Lease() && r.Write():
			c.LeaseWrites++
		case r.Lease():
			c.LeaseReads++
		case r.Write():
			c.Writes++
			c.WritesBy[key]++
			manager := r.FieldManager
			if manager == "" {
				manager = "-"
			}
			c.WritesByManager[manager+": "+key]++
		default:
			c.Reads++
			c.ReadsBy[key]++
		}
	}
	return c
}

// lastWrite returns when the last write other than a lease renewal was
// received in [from, to), and false when there was none.
func lastWrite(reqs []simcluster.Request, from, to time.Time) (time.Time, bool) {
	var last time.Time
	found := false
	for _, r := range reqs {
		if r.Write() && !r.Lease() && !r.At.Before(from) && r.At.Before(to) {
			last, found = r.At, true
		}
	}
	return last, found
}
