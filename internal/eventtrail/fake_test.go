package eventtrail

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// fakeEvents is an API server's events as this package uses them: create,
// get and a merge patch, with versions. fail, while set, answers
// every call with it.
type fakeEvents struct {
	mu     sync.Mutex
	stored map[string]*corev1.Event
	rv     int
	calls  []string
	fail   error
}

func newFakeEvents() *fakeEvents { return &fakeEvents{stored: map[string]*corev1.Event{}} }

func (f *fakeEvents) Events(namespace string) corev1client.EventInterface {
	return &fakeNamespace{f: f, ns: namespace}
}

// put stores ev as another writer would, at a new version.
func (f *fakeEvents) put(ev *corev1.Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rv++
	ev = ev.DeepCopy()
	ev.ResourceVersion = fmt.Sprint(f.rv)
	f.stored[ev.Namespace+"/"+ev.Name] = ev
}

func (f *fakeEvents) only() *corev1.Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.stored) != 1 {
		panic(fmt.Sprintf("%d events stored, want 1", len(f.stored)))
	}
	for _, ev := range f.stored {
		return ev.DeepCopy()
	}
	return nil
}

// call records a call and answers fail, if set; f.mu is held.
func (f *fakeEvents) call(verb string) error {
	f.calls = append(f.calls, verb)
	return f.fail
}

type fakeNamespace struct {
	corev1client.EventInterface
	f  *fakeEvents
	ns string
}

var eventsResource = schema.GroupResource{Resource: "events"}

func (n *fakeNamespace) Create(_ context.Context, ev *corev1.Event, _ metav1.CreateOptions) (*corev1.Event, error) {
	f := n.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("create"); err != nil {
		return nil, err
	}
	if ev.ResourceVersion != "" {
		return nil, apierrors.NewBadRequest("resourceVersion should not be set on objects to be created")
	}
	if _, ok := f.stored[n.ns+"/"+ev.Name]; ok {
		return nil, apierrors.NewAlreadyExists(eventsResource, ev.Name)
	}
	return n.store(ev), nil
}

// Patch takes a merge patch as the API server does: a resourceVersion in
// it must be the stored one.
func (n *fakeNamespace) Patch(_ context.Context, name string, pt types.PatchType, data []byte, _ metav1.PatchOptions, _ ...string) (*corev1.Event, error) {
	f := n.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("patch"); err != nil {
		return nil, err
	}
	if pt != types.MergePatchType {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("patch type %s", pt))
	}
	cur, ok := f.stored[n.ns+"/"+name]
	if !ok {
		return nil, apierrors.NewNotFound(eventsResource, name)
	}
	old, err := json.Marshal(cur)
	if err != nil {
		return nil, err
	}
	merged, err := jsonpatch.MergePatch(old, data)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	next := &corev1.Event{}
	if err := json.Unmarshal(merged, next); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if next.ResourceVersion != cur.ResourceVersion {
		return nil, apierrors.NewConflict(eventsResource, name, fmt.Errorf("the object has been modified"))
	}
	return n.store(next), nil
}

func (n *fakeNamespace) Get(_ context.Context, name string, _ metav1.GetOptions) (*corev1.Event, error) {
	f := n.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("get"); err != nil {
		return nil, err
	}
	cur, ok := f.stored[n.ns+"/"+name]
	if !ok {
		return nil, apierrors.NewNotFound(eventsResource, name)
	}
	return cur.DeepCopy(), nil
}

// store keeps ev at a new version; f.mu is held.
func (n *fakeNamespace) store(ev *corev1.Event) *corev1.Event {
	n.f.rv++
	ev = ev.DeepCopy()
	ev.Namespace = n.ns
	ev.ResourceVersion = fmt.Sprint(n.f.rv)
	n.f.stored[n.ns+"/"+ev.Name] = ev
	return ev.DeepCopy()
}
