package eventtrail

import (
	"fmt"
	"hash/fnv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/reference"
	"k8s.io/client-go/util/workqueue"
)

// Options are a Recorder's settings.
type Options struct {
	// Controller names the operator in each Event (reportingComponent and
	// source), Instance the replica (reportingInstance).
	Controller, Instance string
	// Batch is how long a step waits for the steps after it before its
	// Event is written: the steps of one burst are one write.
	Batch time.Duration
	// Keep is how long an Event's trail stays in memory after its last
	// write. A step after that reads the Event back to go on with its trail.
	Keep time.Duration
	// Remember is how long after its last write an Event whose trail left
	// memory is known to exist: a step then reads it rather than first
	// trying to create it. The API server's event TTL (--event-ttl, one
	// hour by default) deletes it after that.
	Remember time.Duration
	// Tries is how many times a write that failed for a reason other than
	// the Event's own state is tried before its steps are dropped.
	Tries int
	// Now is the clock the steps are stamped by; time.Now when nil.
	Now func() time.Time
}

// DefaultOptions are the settings the operator runs with. A trail whose
// steps come less than Keep apart (an upgrade's, a MIG change's) is
// written without a read; one that waits longer costs a read of its Event
// per step, which is cheaper than holding a kilobyte per node of a fleet.
// Tries is client-go's (tools/events maxTriesPerEvent).
func DefaultOptions(controller, instance string) Options {
	return Options{Controller: controller, Instance: instance, Batch: time.Second, Keep: 2 * time.Minute,
		Remember: time.Hour, Tries: 12}
}

// Recorder is an events.EventRecorder that keeps one Event per object,
// reason and type: each Eventf adds a step, newest first, to that Event's
// message, and counts it. kubectl describe then shows an operation's
// trail on one row, and a fleet's events cost memory per node in
// operation rather than per step.
//
// Events are written in the background, as client-go's recorder writes
// them: Eventf never waits for the API server. Nothing the operator
// decides reads them back, so what is kept in memory is only what saves a
// read: a restarted operator goes on with the trail it finds.
type Recorder struct {
	client corev1client.EventsGetter
	scheme *runtime.Scheme
	log    logr.Logger
	opts   Options

	queue   workqueue.TypedRateLimitingInterface[key]
	mu      sync.Mutex
	entries map[key]*entry
	// known are the Events whose trails left memory, by when each was
	// last written.
	known map[key]time.Time
}

var _ events.EventRecorder = (*Recorder)(nil)

// key is what one Event is about.
type key struct {
	// uid names the object; kind and name too, for an object without a
	// UID (one built in memory rather than read).
	uid               types.UID
	kind, namespace   string
	name, reason, typ string
}

// entry is an Event's trail as this process knows it.
type entry struct {
	ref       corev1.ObjectReference
	related   *corev1.ObjectReference
	action    string
	namespace string
	name      string
	// pending are the steps not yet written, oldest first: as many as
	// fit a message. unwritten counts them with those dropped for room
	// and the repeats of the newest step.
	pending   []step
	unwritten int32
	// written is the message as last written, resourceVersion its
	// version, count and first the Event's count and first time: empty
	// while this process has not written the Event.
	written, resourceVersion string
	count                    int32
	first                    time.Time
	// exists says the Event was written before its trail came back to
	// memory: it is read rather than created.
	exists bool
	// newest is the text of the newest step recorded, written or not;
	// lastSeen is when it, or its repeat, was recorded.
	newest   string
	lastSeen time.Time
	// lastWrite is when the Event was last written; tries counts the
	// failed writes of the steps now pending.
	lastWrite time.Time
	tries     int
}

// New returns a Recorder that writes through client; Start runs its writer.
func New(client corev1client.EventsGetter, scheme *runtime.Scheme, log logr.Logger, opts Options) *Recorder {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Recorder{
		client: client, scheme: scheme, log: log, opts: opts,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[key](),
			workqueue.TypedRateLimitingQueueConfig[key]{Name: "eventtrail"}),
		entries: map[key]*entry{},
		known:   map[key]time.Time{},
	}
}

// Eventf adds a step to the Event about regarding with this reason and
// type. related, where given, is the latest step's other object.
func (r *Recorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	ref, err := reference.GetReference(r.scheme, regarding)
	if err != nil {
		r.log.Error(err, "event dropped: no reference to its object", "reason", reason)
		return
	}
	text := strings.ReplaceAll(fmt.Sprintf(note, args...), "\n", " ")
	r.log.V(1).Info("event", "type", eventtype, "object", ref, "reason", reason, "note", text)
	var rel *corev1.ObjectReference
	if related != nil {
		if rel, err = reference.GetReference(r.scheme, related); err == nil {
			rel.ResourceVersion = ""
		}
	}
	// The object's version changes with every write to it: the Event
	// names the object, not one of its versions.
	ref.ResourceVersion = ""
	k := key{uid: ref.UID, kind: ref.Kind, namespace: ref.Namespace, name: ref.Name, reason: reason, typ: eventtype}
	now := r.opts.Now()

	r.mu.Lock()
	e := r.entries[k]
	if e == nil {
		e = &entry{ref: *ref, namespace: eventNamespace(ref), name: eventName(ref, reason, eventtype)}
		_, e.exists = r.known[k]
		delete(r.known, k)
		r.entries[k] = e
	}
	repeat := !e.lastSeen.IsZero() && e.newest == text
	e.action, e.related, e.lastSeen = action, rel, now
	e.unwritten++
	if repeat {
		// The same step again (a pod that keeps a node waiting, at every
		// look): counted, and written with the next step that differs or
		// at the Keep timer, at most once per Keep, as a series would be.
		r.mu.Unlock()
		return
	}
	e.newest = text
	e.pending = fitting(append(e.pending, step{at: now, text: text}))
	first := len(e.pending) == 1
	r.mu.Unlock()
	if first {
		r.queue.AddAfter(k, r.opts.Batch)
	}
}

// fitting drops the oldest steps that would not fit a message, so that a
// writer that cannot write holds at most one message per Event.
func fitting(steps []step) []step {
	total := 0
	for i := len(steps) - 1; i >= 0; i-- {
		total += len(steps[i].String()) + len(separator)
		if total > noteLimit+len(separator) && i < len(steps)-1 {
			return steps[i+1:]
		}
	}
	return steps
}

// eventNamespace is where an Event about ref lives: its object's
// namespace, or default for a cluster-scoped object, where the API server
// and kubectl look for them.
func eventNamespace(ref *corev1.ObjectReference) string {
	if ref.Namespace != "" {
		return ref.Namespace
	}
	return corev1.NamespaceDefault
}

// eventName is the one name of the Event about ref's object with this
// reason and type, stable across restarts: the object's name, and a hash
// of its kind, namespace, name, UID, the reason and the type.
func eventName(ref *corev1.ObjectReference, reason, typ string) string {
	h := fnv.New64a()
	for _, s := range []string{ref.Kind, ref.Namespace, ref.Name, string(ref.UID), reason, typ} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return fmt.Sprintf("%s.%016x", cut(ref.Name, 253-17), h.Sum64())
}
