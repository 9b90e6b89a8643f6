package restconfig

import (
	"testing"

	"k8s.io/client-go/rest"
)

func TestProtobufLeavesTheGivenConfigAlone(t *testing.T) {
	in := &rest.Config{Host: "https://127.0.0.1:6443", QPS: 50}
	out := Protobuf(in)
	if in.ContentType != "" || in.AcceptContentTypes != "" {
		t.Errorf("Protobuf changed its input: %q, %q", in.ContentType, in.AcceptContentTypes)
	}
	if out.ContentType != "application/vnd.kubernetes.protobuf" ||
		out.AcceptContentTypes != "application/vnd.kubernetes.protobuf,application/json" {
		t.Errorf("Protobuf = %q accepting %q", out.ContentType, out.AcceptContentTypes)
	}
	if out.Host != in.Host || out.QPS != in.QPS {
		t.Errorf("Protobuf dropped the rest of the config: %+v", out)
	}
}
