package clusterpolicy

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// servedTTL is how long an answer about an optional kind is trusted. A
// kind the mapper does not know costs a discovery request each time it is
// asked about, so the answer is remembered for a while: a CRD installed
// later (the Prometheus Operator's) is noticed within a minute.
const servedTTL = time.Minute

// servedKinds answers whether the API server serves a kind.
type servedKinds struct {
	mapper meta.RESTMapper
	now    func() time.Time

	mu      sync.Mutex
	answers map[schema.GroupVersionKind]servedAnswer
}

type servedAnswer struct {
	served bool
	at     time.Time
}

func newServedKinds(mapper meta.RESTMapper) *servedKinds {
	return &servedKinds{mapper: mapper, now: time.Now, answers: map[schema.GroupVersionKind]servedAnswer{}}
}

func (s *servedKinds) served(gvk schema.GroupVersionKind) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a, ok := s.answers[gvk]; ok && s.now().Sub(a.at) < servedTTL {
		return a.served
	}
	_, err := s.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	s.answers[gvk] = servedAnswer{served: err == nil, at: s.now()}
	return err == nil
}
