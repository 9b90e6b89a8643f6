package apply

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

var kindConfigMap = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}

// policyOwner is the controller reference the renderers set.
var policyOwner = metav1.OwnerReference{APIVersion: "nvidia.com/v1", Kind: "ClusterPolicy", Name: "cluster-policy",
	UID: "uid-1", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}

// configMap is a rendered object: the kind set, as the renderers set it.
func configMap(name, value string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "gpu-operator", Labels: map[string]string{"managed": "yes"},
			OwnerReferences: []metav1.OwnerReference{policyOwner}},
		Data: map[string]string{"key": value},
	}
}

// newApplier returns an applier on a fake API server and a count of the
// applies it sends.
func newApplier(t *testing.T, objs ...client.Object) (*Applier, client.Client, *atomic.Int64) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	applies := &atomic.Int64{}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			applies.Add(1)
			return c.Apply(ctx, obj, opts...)
		},
	}).Build()
	return &Applier{Client: c, Reader: c, Owner: "test"}, c, applies
}

func mustApply(t *testing.T, a *Applier, obj client.Object, wantSent bool) {
	t.Helper()
	sent, err := a.Apply(context.Background(), obj)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if sent != wantSent {
		t.Fatalf("Apply sent a request: %v, want %v", sent, wantSent)
	}
}

func get(t *testing.T, c client.Client, name string) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "gpu-operator", Name: name}, cm); err != nil {
		t.Fatal(err)
	}
	return cm
}

func TestApplySkipsWhatItAppliedAndNobodyChanged(t *testing.T) {
	a, _, applies := newApplier(t)
	mustApply(t, a, configMap("c", "1"), true)
	mustApply(t, a, configMap("c", "1"), false)
	mustApply(t, a, configMap("c", "2"), true)
	mustApply(t, a, configMap("c", "2"), false)
	if n := applies.Load(); n != 2 {
		t.Fatalf("%d applies sent, want 2", n)
	}
}

// TestApplyRevertsEdits is finding 3 of issue 12: an edit that leaves the
// applied-hash annotation in place used to stay until the policy changed.
func TestApplyRevertsEdits(t *testing.T) {
	for name, edit := range map[string]func(*corev1.ConfigMap){
		"content":          func(cm *corev1.ConfigMap) { cm.Data["key"] = "edited" },
		"label removed":    func(cm *corev1.ConfigMap) { delete(cm.Labels, "managed") },
		"label changed":    func(cm *corev1.ConfigMap) { cm.Labels["managed"] = "no" },
		"annotation taken": func(cm *corev1.ConfigMap) { delete(cm.Annotations, AnnotationAppliedHash) },
	} {
		t.Run(name, func(t *testing.T) {
			a, c, _ := newApplier(t)
			mustApply(t, a, configMap("c", "1"), true)
			cm := get(t, c, "c")
			edit(cm)
			if err := c.Update(context.Background(), cm); err != nil {
				t.Fatal(err)
			}
			mustApply(t, a, configMap("c", "1"), true)
			got := get(t, c, "c")
			if got.Data["key"] != "1" || got.Labels["managed"] != "yes" || got.Annotations[AnnotationAppliedHash] == "" {
				t.Fatalf("edit not reverted: data %v, labels %v, annotations %v", got.Data, got.Labels, got.Annotations)
			}
			mustApply(t, a, configMap("c", "1"), false)
		})
	}
}

// A new process (an operator restart) does not know what the live object
// was applied from: it applies once, then skips.
func TestApplyAfterRestartAppliesOnce(t *testing.T) {
	a, c, _ := newApplier(t)
	mustApply(t, a, configMap("c", "1"), true)
	restarted := &Applier{Client: c, Reader: c, Owner: "test"}
	mustApply(t, restarted, configMap("c", "1"), true)
	mustApply(t, restarted, configMap("c", "1"), false)
}

func TestApplyFailureIsRetried(t *testing.T) {
	a, c, _ := newApplier(t)
	mustApply(t, a, configMap("c", "1"), true)
	failing := &Applier{Client: interceptor.NewClient(c.(client.WithWatch), interceptor.Funcs{
		Apply: func(context.Context, client.WithWatch, runtime.ApplyConfiguration, ...client.ApplyOption) error {
			return errRefused
		},
	}), Reader: c, Owner: "test", written: a.written}
	if _, err := failing.Apply(context.Background(), configMap("c", "2")); err == nil {
		t.Fatal("a refused apply reported no error")
	}
	// The object still holds "1": the next apply of "1" must not be
	// skipped on the strength of the failed attempt's memory.
	cm := get(t, c, "c")
	cm.Data["key"] = "edited"
	if err := c.Update(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	mustApply(t, a, configMap("c", "1"), true)
}

func TestPruneDeletesOnlyManagedObjectsNotKept(t *testing.T) {
	other := configMap("users", "x")
	other.Labels = map[string]string{"managed": "no"}
	a, c, _ := newApplier(t, other)
	mustApply(t, a, configMap("keep", "1"), true)
	mustApply(t, a, configMap("gone", "1"), true)
	keep := map[Key]bool{KeyOf(configMap("keep", "1")): true}
	n, err := a.Prune(context.Background(), []schema.GroupVersionKind{kindConfigMap}, client.MatchingLabels{"managed": "yes"}, keep, nil)
	if err != nil || n != 1 {
		t.Fatalf("Prune deleted %d (err %v), want 1", n, err)
	}
	list := &corev1.ConfigMapList{}
	if err := c.List(context.Background(), list); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, cm := range list.Items {
		names = append(names, cm.Name)
	}
	if len(names) != 2 || names[0] != "keep" || names[1] != "users" {
		t.Fatalf("left %v, want [keep users]", names)
	}
	// A pruned object rendered again is created again.
	mustApply(t, a, configMap("gone", "1"), true)
}

var errRefused = errors.New("refused")

// A label is anyone's to set: prune deletes only what a ClusterPolicy
// controls, however it is labelled.
func TestPruneLeavesObjectsNoPolicyControls(t *testing.T) {
	labelledByOthers := configMap("theirs", "x")
	labelledByOthers.OwnerReferences = nil
	a, c, _ := newApplier(t, labelledByOthers)
	n, err := a.Prune(context.Background(), []schema.GroupVersionKind{kindConfigMap}, client.MatchingLabels{"managed": "yes"}, nil, nil)
	if err != nil || n != 0 {
		t.Fatalf("Prune deleted %d (err %v), want 0", n, err)
	}
	get(t, c, "theirs")
}

// An object the operator would create that someone else made first is
// neither overwritten nor adopted, whether or not the cache (which holds
// only labelled objects) shows it.
func TestApplyLeavesSomeoneElsesObject(t *testing.T) {
	for name, inCache := range map[string]bool{"invisible to the cache": false, "labelled like ours": true} {
		t.Run(name, func(t *testing.T) {
			theirs := configMap("nvidia", "theirs")
			theirs.OwnerReferences = nil
			a, c, applies := newApplier(t, theirs)
			if !inCache {
				empty, _, _ := newApplier(t)
				a.Reader, a.Live = empty.Client, c
			}
			_, err := a.Apply(context.Background(), configMap("nvidia", "ours"))
			var foreign *ForeignError
			if !errors.As(err, &foreign) || foreign.Name != "nvidia" {
				t.Fatalf("Apply: %v, want a ForeignError", err)
			}
			if applies.Load() != 0 || get(t, c, "nvidia").Data["key"] != "theirs" {
				t.Fatal("someone else's object was written")
			}
		})
	}
}

// The cache lagging behind the operator's own create is not someone else.
func TestApplyRecognisesItsOwnObjectMissingFromTheCache(t *testing.T) {
	a, c, applies := newApplier(t, configMap("nvidia", "1"))
	empty, _, _ := newApplier(t)
	a.Reader, a.Live = empty.Client, c
	mustApply(t, a, configMap("nvidia", "2"), true)
	if applies.Load() != 1 || get(t, c, "nvidia").Data["key"] != "2" {
		t.Fatal("the operator's own object was not applied")
	}
}
