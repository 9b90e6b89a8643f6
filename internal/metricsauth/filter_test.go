package metricsauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// fakeReviewer knows one token per user and which users may get which
// paths, and counts its reviews.
type fakeReviewer struct {
	users   map[string]string // token -> user
	allowed map[string]string // user -> path
	fail    error
	reviews int
}

func (f *fakeReviewer) Authenticate(_ context.Context, token string) (*authnv1.UserInfo, error) {
	f.reviews++
	if f.fail != nil {
		return nil, f.fail
	}
	u, ok := f.users[token]
	if !ok {
		return nil, nil
	}
	return &authnv1.UserInfo{Username: u}, nil
}

func (f *fakeReviewer) Authorize(_ context.Context, u *authnv1.UserInfo, verb, path string) (bool, error) {
	return verb == "get" && f.allowed[u.Username] == path, nil
}

func serve(g Gomega, f *fakeReviewer, now func() time.Time) http.Handler {
	h, err := NewFilter(f, now)(logr.Discard(), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("gpu_operator_gpu_nodes 3\n"))
	}))
	g.Expect(err).NotTo(HaveOccurred())
	return h
}

func get(h http.Handler, path, auth string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodGet, path, nil)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func TestFilter(t *testing.T) {
	tests := map[string]struct {
		path, auth string
		fail       error
		want       int
	}{
		"no token":                    {path: "/metrics", want: http.StatusUnauthorized},
		"basic auth is not a token":   {path: "/metrics", auth: "Basic cHJvbTpwcm9t", want: http.StatusUnauthorized},
		"empty bearer":                {path: "/metrics", auth: "Bearer ", want: http.StatusUnauthorized},
		"unknown token":               {path: "/metrics", auth: "Bearer stolen", want: http.StatusUnauthorized},
		"known user without the role": {path: "/metrics", auth: "Bearer tok-viewer", want: http.StatusForbidden},
		"metrics reader":              {path: "/metrics", auth: "Bearer tok-prometheus", want: http.StatusOK},
		"scheme is case-insensitive":  {path: "/metrics", auth: "bearer tok-prometheus", want: http.StatusOK},
		"reader of another path":      {path: "/debug", auth: "Bearer tok-prometheus", want: http.StatusForbidden},
		"API server unreachable":      {path: "/metrics", auth: "Bearer tok-prometheus", fail: errors.New("connection refused"), want: http.StatusInternalServerError},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			f := &fakeReviewer{
				users:   map[string]string{"tok-prometheus": "system:serviceaccount:monitoring:prometheus", "tok-viewer": "alice"},
				allowed: map[string]string{"system:serviceaccount:monitoring:prometheus": "/metrics"},
				fail:    tt.fail,
			}
			rec := get(serve(g, f, time.Now), tt.path, tt.auth)
			g.Expect(rec.Code).To(Equal(tt.want), rec.Body.String())
			if tt.want == http.StatusOK {
				g.Expect(rec.Body.String()).To(ContainSubstring("gpu_operator_gpu_nodes"))
			} else {
				g.Expect(rec.Body.String()).NotTo(ContainSubstring("gpu_operator"), "refused callers must not see metrics")
			}
		})
	}
}

// A scraper's token is reviewed once a minute, not on every scrape; a
// refusal is remembered briefly; an error is never remembered.
func TestFilterCachesDecisions(t *testing.T) {
	g := NewWithT(t)
	now := time.Unix(0, 0)
	clock := func() time.Time { return now }
	f := &fakeReviewer{
		users:   map[string]string{"tok-prometheus": "prometheus", "tok-viewer": "alice"},
		allowed: map[string]string{"prometheus": "/metrics"},
	}
	h := serve(g, f, clock)

	for range 4 {
		g.Expect(get(h, "/metrics", "Bearer tok-prometheus").Code).To(Equal(http.StatusOK))
		now = now.Add(15 * time.Second)
	}
	g.Expect(f.reviews).To(Equal(1), "four scrapes within a minute")
	g.Expect(get(h, "/metrics", "Bearer tok-prometheus").Code).To(Equal(http.StatusOK))
	g.Expect(f.reviews).To(Equal(2), "reviewed again after a minute")

	g.Expect(get(h, "/metrics", "Bearer tok-viewer").Code).To(Equal(http.StatusForbidden))
	g.Expect(get(h, "/metrics", "Bearer tok-viewer").Code).To(Equal(http.StatusForbidden))
	g.Expect(f.reviews).To(Equal(3))
	now = now.Add(denyTTL)
	f.allowed["alice"] = "/metrics" // the role was bound meanwhile
	g.Expect(get(h, "/metrics", "Bearer tok-viewer").Code).To(Equal(http.StatusOK))

	f.fail = errors.New("timeout")
	g.Expect(get(h, "/metrics", "Bearer tok-new").Code).To(Equal(http.StatusInternalServerError))
	f.fail = nil
	f.users["tok-new"] = "prometheus"
	g.Expect(get(h, "/metrics", "Bearer tok-new").Code).To(Equal(http.StatusOK), "an error must not be cached")
}

// However many tokens callers send, the endpoint asks the API server for
// a few reviews a second, and remembers a bounded number of decisions.
func TestFilterBoundsReviews(t *testing.T) {
	g := NewWithT(t)
	now := time.Unix(0, 0)
	f := &fakeReviewer{users: map[string]string{}}
	h, err := NewFilter(f, func() time.Time { return now })(logr.Discard(), http.NotFoundHandler())
	g.Expect(err).NotTo(HaveOccurred())
	codes := map[int]int{}
	for i := range 100 {
		codes[get(h, "/metrics", fmt.Sprintf("Bearer junk-%d", i)).Code]++
	}
	g.Expect(f.reviews).To(Equal(reviewBurst), "a burst, then nothing more in the same instant")
	g.Expect(codes).To(Equal(map[int]int{http.StatusUnauthorized: reviewBurst, http.StatusTooManyRequests: 100 - reviewBurst}))
	now = now.Add(time.Second)
	g.Expect(get(h, "/metrics", "Bearer junk-x").Code).To(Equal(http.StatusUnauthorized), "reviews again after a while")
	g.Expect(len(h.(*guard).cache)).To(BeNumerically("<=", maxCached))
}

// A full cache drops refusals and expired decisions before a scraper's
// allowance.
func TestFilterEvictsRefusalsFirst(t *testing.T) {
	g := NewWithT(t)
	now := time.Unix(0, 0)
	h, err := NewFilter(&fakeReviewer{}, func() time.Time { return now })(logr.Discard(), http.NotFoundHandler())
	g.Expect(err).NotTo(HaveOccurred())
	guard := h.(*guard)
	guard.remember("prometheus", http.StatusOK)
	for i := range maxCached - 1 {
		guard.remember(fmt.Sprintf("junk-%d", i), http.StatusUnauthorized)
	}
	g.Expect(guard.cache).To(HaveLen(maxCached))
	guard.remember("one-more", http.StatusUnauthorized)
	g.Expect(guard.cache).To(HaveKey("prometheus"))
	g.Expect(len(guard.cache)).To(BeNumerically("<", maxCached))
}

// The API reviewer sends the token to a TokenReview and the reviewed user,
// with groups and extra, to a SubjectAccessReview on a non-resource URL.
func TestAPIReviewer(t *testing.T) {
	g := NewWithT(t)
	cs := fake.NewClientset()
	var sar *authzv1.SubjectAccessReview
	cs.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		tr := a.(k8stesting.CreateAction).GetObject().(*authnv1.TokenReview)
		tr.Status = authnv1.TokenReviewStatus{Authenticated: tr.Spec.Token == "good",
			User: authnv1.UserInfo{Username: "prom", UID: "u1", Groups: []string{"g"}, Extra: map[string]authnv1.ExtraValue{"k": {"v"}}}}
		return true, tr, nil
	})
	cs.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sar = a.(k8stesting.CreateAction).GetObject().(*authzv1.SubjectAccessReview)
		sar.Status.Allowed = true
		return true, sar, nil
	})
	r := apiReviewer{cs}
	u, err := r.Authenticate(context.Background(), "bad")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(u).To(BeNil())
	u, err = r.Authenticate(context.Background(), "good")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(u.Username).To(Equal("prom"))
	ok, err := r.Authorize(context.Background(), u, "get", "/metrics")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeTrue())
	g.Expect(sar.Spec.User).To(Equal("prom"))
	g.Expect(sar.Spec.UID).To(Equal("u1"))
	g.Expect(sar.Spec.Groups).To(Equal([]string{"g"}))
	g.Expect(sar.Spec.Extra).To(HaveKeyWithValue("k", authzv1.ExtraValue{"v"}))
	g.Expect(sar.Spec.NonResourceAttributes).To(Equal(&authzv1.NonResourceAttributes{Path: "/metrics", Verb: "get"}))
	g.Expect(sar.Spec.ResourceAttributes).To(BeNil())
}
