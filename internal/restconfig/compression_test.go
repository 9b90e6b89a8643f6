package restconfig

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// acceptEncoding returns the Accept-Encoding header of a request a
// clientset built from the configured config sends to a server on
// 127.0.0.1. Over TLS and HTTP/2, as to every API server: without TLS,
// client-go uses Go's default transport, whatever the config says.
func acceptEncoding(t *testing.T, configure func(*rest.Config) *rest.Config) string {
	t.Helper()
	got := make(chan string, 1)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen := r.Header.Get("Accept-Encoding")
		if r.ProtoMajor != 2 {
			seen = "(not over HTTP/2: " + r.Proto + ")"
		}
		select {
		case got <- seen:
		default:
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"Node","apiVersion":"v1","metadata":{"name":"gpu-node-0"}}`))
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	cs, err := kubernetes.NewForConfig(configure(&rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Nodes().Get(context.Background(), "gpu-node-0", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	return <-got
}

func TestUncompressedAsksForNoGzip(t *testing.T) {
	// The transport's default, which the test must be able to tell apart.
	if got := acceptEncoding(t, rest.CopyConfig); got != "gzip" {
		t.Fatalf("a default client sent Accept-Encoding %q, want gzip", got)
	}
	if got := acceptEncoding(t, Uncompressed); got != "" {
		t.Errorf("Uncompressed sent Accept-Encoding %q, want none", got)
	}
	// Protobuf's copy keeps it: the operator's informers are built on it.
	if got := acceptEncoding(t, func(c *rest.Config) *rest.Config { return Protobuf(Uncompressed(c)) }); got != "" {
		t.Errorf("Protobuf(Uncompressed) sent Accept-Encoding %q, want none", got)
	}
}

func TestUncompressedLeavesTheGivenConfigAlone(t *testing.T) {
	in := &rest.Config{Host: "https://127.0.0.1:6443", QPS: 50}
	out := Uncompressed(in)
	if in.DisableCompression || !out.DisableCompression || out.Host != in.Host || out.QPS != in.QPS {
		t.Errorf("Uncompressed: DisableCompression %v in, %v out; out host %q, QPS %v", in.DisableCompression, out.DisableCompression, out.Host, out.QPS)
	}
}
