package wire

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	"k8s.io/client-go/rest"
)

// Runnable is an informer-backed index: it lists and watches until ctx ends.
type Runnable interface {
	Start(ctx context.Context) error
}

// FirstAccept starts what build returns against a fake API server that
// answers every list with an empty JSON list of kind listKind (apiVersion
// groupVersion) and holds every watch open, and returns the Accept header
// of the first request it received, a list or a streamed list's watch.
func FirstAccept(t *testing.T, groupVersion, listKind string, build func(*rest.Config) (Runnable, error)) string {
	t.Helper()
	accepts := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case accepts <- r.Header.Get("Accept"):
		default:
		}
		if r.URL.Query().Get("watch") == "true" {
			<-r.Context().Done()
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"kind":%q,"apiVersion":%q,"metadata":{"resourceVersion":"1"},"items":[]}`, listKind, groupVersion)
	}))
	t.Cleanup(srv.Close)
	r, err := build(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	// Before the server closes: its Close waits for the held watch.
	t.Cleanup(cancel)
	go func() { _ = r.Start(ctx) }()
	select {
	case got := <-accepts:
		return got
	case <-time.After(30 * time.Second):
		t.Fatal("the informer sent no request in 30 s")
		return ""
	}
}

// ExpectProtobuf fails t unless what build returns asks for protobuf first
// (see FirstAccept for the arguments).
func ExpectProtobuf(t *testing.T, groupVersion, listKind string, build func(*rest.Config) (Runnable, error)) {
	t.Helper()
	if accept := FirstAccept(t, groupVersion, listKind, build); !strings.HasPrefix(accept, runtime.ContentTypeProtobuf) {
		t.Errorf("the %s informer asked for %q, want protobuf first", listKind, accept)
	}
}
