package gating

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-operator/gpu-operator/internal/eventtrail"
	"github.com/gpu-operator/gpu-operator/internal/test/controllertest"
	"github.com/gpu-operator/gpu-operator/internal/test/envtest"
)

// The trail's writes as the API server takes them (internal/eventtrail's
// own tests use a fake): a core Event's message changed by a merge patch
// at its resourceVersion, a restarted recorder going on from the Event
// it finds, a person's edit kept, and a deleted Event started afresh.
func TestAnEventTrailOnTheAPIServer(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events, err := corev1client.NewForConfig(suite.Config())
	g.Expect(err).NotTo(HaveOccurred())
	start := func() *eventtrail.Recorder {
		rec := eventtrail.New(events, envtest.NewScheme(), logr.Discard(), eventtrail.Options{
			Controller: "gpu-operator", Instance: "gpu-operator-test", Keep: time.Minute, Tries: 3})
		go func() { _ = rec.Start(ctx) }()
		return rec
	}
	node := &corev1.Node{TypeMeta: metav1.TypeMeta{Kind: "Node", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: "trail-node", UID: types.UID("6f1d2c3b-trail-node")}}
	trail := func() (steps []string, count int32) {
		list := &corev1.EventList{}
		g.Expect(suite.Client.List(ctx, list, client.InNamespace("default"),
			client.MatchingFields{"involvedObject.uid": string(node.UID)})).To(Succeed())
		if len(list.Items) != 1 {
			return nil, int32(len(list.Items))
		}
		return eventtrail.Steps(list.Items[0].Message), list.Items[0].Count
	}
	step := func(rec *eventtrail.Recorder, text string, want ...string) {
		t.Helper()
		rec.Eventf(node, nil, corev1.EventTypeNormal, "GPUDriverUpgrade", "Upgrade", "%s", text)
		g.Eventually(func() []string { s, _ := trail(); return s }, controllertest.Timeout, controllertest.Interval).
			Should(Equal(want), "after %q", text)
	}

	first := start()
	step(first, "one", "one")
	step(first, "two", "two", "one")
	_, count := trail()
	g.Expect(count).To(BeEquivalentTo(2))

	second := start()
	step(second, "three", "three", "two", "one")

	list := &corev1.EventList{}
	g.Expect(suite.Client.List(ctx, list, client.InNamespace("default"),
		client.MatchingFields{"involvedObject.uid": string(node.UID)})).To(Succeed())
	edited := list.Items[0]
	edited.Message = "a person's note | " + edited.Message
	g.Expect(suite.Client.Update(ctx, &edited)).To(Succeed())
	step(second, "four", "four", "a person's note", "three", "two", "one")
	_, count = trail()
	g.Expect(count).To(BeEquivalentTo(4))

	g.Expect(suite.Client.Delete(ctx, &edited)).To(Succeed())
	step(second, "five", "five")
	_, count = trail()
	g.Expect(count).To(BeEquivalentTo(1))
}
