package apply

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
)

// AnnotationAppliedHash is the hash of the object as last applied: what the
// operator rendered, not what the object holds now.
const AnnotationAppliedHash = gpuv1.OperatorAnnotationPrefix + "applied-hash"

// Applier applies and prunes operator objects.
type Applier struct {
	// Client writes; Reader reads object metadata, normally from the cache.
	Client client.Client
	Reader client.Reader
	// Live, when set, is asked about an object the Reader does not have
	// (the cache holds only the operator's objects): one that exists all the
	// same was made by someone else, and is not taken over.
	Live client.Reader
	// Owner is the field manager of every apply.
	Owner string

	mu sync.Mutex
	// written remembers, per object, what this process last applied and
	// the version the API server answered with.
	written map[Key]writtenVersion
}

// writtenVersion is an object as the API server stored it after an apply:
// its generation, which every change of its spec bumps, or, for kinds
// without one (ConfigMaps, RBAC, RuntimeClasses), its resourceVersion.
type writtenVersion struct {
	hash, version string
}

// Apply applies obj unless the object in the cluster is still the one this
// process applied from the same content. Someone else's change to its spec
// (kubectl edit removing a gate, another image), labels or annotations is
// reverted on the next reconcile. After a restart every object is applied
// once: an apply of unchanged content changes nothing on the server. It
// reports whether it sent a request.
func (a *Applier) Apply(ctx context.Context, obj client.Object) (bool, error) {
	u, err := toUnstructured(obj)
	if err != nil {
		return false, err
	}
	hash, err := hashOf(u)
	if err != nil {
		return false, err
	}
	u.SetAnnotations(withAnnotation(u.GetAnnotations(), AnnotationAppliedHash, hash))

	current := &metav1.PartialObjectMetadata{}
	current.SetGroupVersionKind(u.GroupVersionKind())
	key := Key{GVK: u.GroupVersionKind(), NamespacedName: client.ObjectKeyFromObject(u)}
	switch err := a.Reader.Get(ctx, key.NamespacedName, current); {
	case err == nil && !ControlledByClusterPolicy(current):
		return false, &ForeignError{Kind: u.GetKind(), Name: u.GetName()}
	case err == nil && a.unchanged(key, hash, u, current):
		return false, nil
	case apierrors.IsNotFound(err):
		if err := a.notSomeoneElses(ctx, u); err != nil {
			return false, err
		}
	case err != nil:
		return false, fmt.Errorf("reading %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	if err := a.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u),
		client.FieldOwner(a.Owner), client.ForceOwnership); err != nil {
		a.forget(key)
		return false, fmt.Errorf("applying %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	// The answer is the object as stored.
	a.remember(key, writtenVersion{hash: hash, version: versionOf(u)})
	return true, nil
}

// ForeignError is an object the operator would create that exists already,
// not controlled by a ClusterPolicy: an administrator's, a distribution's
// (k3s ships an nvidia RuntimeClass) or another installer's. It is left as
// it is, never overwritten, and never deleted.
type ForeignError struct {
	Kind, Name string
}

func (e *ForeignError) Error() string {
	return fmt.Sprintf("%s %s exists and was not created by the operator: it is left as it is", e.Kind, e.Name)
}

// notSomeoneElses asks the API server whether an object missing from the
// cache exists all the same, and returns a ForeignError if it is not the
// operator's (the cache may also lag behind the operator's own create).
func (a *Applier) notSomeoneElses(ctx context.Context, u *unstructured.Unstructured) error {
	if a.Live == nil {
		return nil
	}
	live := &metav1.PartialObjectMetadata{}
	live.SetGroupVersionKind(u.GroupVersionKind())
	switch err := a.Live.Get(ctx, client.ObjectKeyFromObject(u), live); {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("reading %s %s: %w", u.GetKind(), u.GetName(), err)
	case !ControlledByClusterPolicy(live):
		return &ForeignError{Kind: u.GetKind(), Name: u.GetName()}
	}
	return nil
}

// ControlledByClusterPolicy reports whether a ClusterPolicy is the object's
// controller: the operator made it (or, migrating, NVIDIA's operator, whose
// ClusterPolicy is the same kind). Only such objects are applied over,
// pruned, and deleted on uninstall.
func ControlledByClusterPolicy(obj metav1.Object) bool {
	ref := metav1.GetControllerOfNoCopy(obj)
	if ref == nil || ref.Kind != "ClusterPolicy" {
		return false
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	return err == nil && gv.Group == gpuv1.GroupVersion.Group
}

// unchanged reports whether the live object is still what this process
// applied from the rendered content: same hash, the version the API server
// answered with, and every rendered label and annotation in place.
func (a *Applier) unchanged(key Key, hash string, rendered *unstructured.Unstructured, live *metav1.PartialObjectMetadata) bool {
	if live.Annotations[AnnotationAppliedHash] != hash {
		return false
	}
	a.mu.Lock()
	last, ok := a.written[key]
	a.mu.Unlock()
	if !ok || last.hash != hash || last.version != versionOf(live) {
		return false
	}
	return contains(live.Labels, rendered.GetLabels()) && contains(live.Annotations, rendered.GetAnnotations())
}

func (a *Applier) remember(key Key, v writtenVersion) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.written == nil {
		a.written = map[Key]writtenVersion{}
	}
	a.written[key] = v
}

func (a *Applier) forget(key Key) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.written, key)
}

// versionOf names the version of an object that matters for drift: its
// generation where the kind keeps one, so that status updates (a
// DaemonSet's, thousands in a rollout) do not count as changes.
func versionOf(obj metav1.Object) string {
	if g := obj.GetGeneration(); g > 0 {
		return fmt.Sprintf("generation %d", g)
	}
	return "resourceVersion " + obj.GetResourceVersion()
}

func contains(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// Key identifies an object across kinds.
type Key struct {
	GVK schema.GroupVersionKind
	types.NamespacedName
}

// KeyOf returns the key of obj, whose apiVersion and kind must be set.
func KeyOf(obj client.Object) Key {
	return Key{GVK: obj.GetObjectKind().GroupVersionKind(), NamespacedName: client.ObjectKeyFromObject(obj)}
}

// Prune deletes the objects of the given kinds that carry the selector's
// labels, are controlled by a ClusterPolicy (a label alone is no proof: a
// generic one like app.kubernetes.io/managed-by can be anyone's) and are not
// in keep. Objects for which orphan says so are deleted
// without their dependents (a DaemonSet's pods keep running); orphan may be
// nil. It reports how many it deleted.
func (a *Applier) Prune(ctx context.Context, kinds []schema.GroupVersionKind, selector client.MatchingLabels, keep map[Key]bool,
	orphan func(*metav1.PartialObjectMetadata) bool) (int, error) {
	deleted := 0
	for _, gvk := range kinds {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := a.Reader.List(ctx, list, selector); err != nil {
			return deleted, fmt.Errorf("listing %s to prune: %w", gvk.Kind, err)
		}
		for i := range list.Items {
			item := &list.Items[i]
			item.SetGroupVersionKind(gvk)
			if keep[KeyOf(item)] || item.DeletionTimestamp != nil || !ControlledByClusterPolicy(item) {
				continue
			}
			propagation := metav1.DeletePropagationBackground
			if orphan != nil && orphan(item) {
				propagation = metav1.DeletePropagationOrphan
			}
			if err := a.Client.Delete(ctx, item, client.PropagationPolicy(propagation)); client.IgnoreNotFound(err) != nil {
				return deleted, fmt.Errorf("pruning %s %s: %w", gvk.Kind, item.Name, err)
			}
			a.forget(KeyOf(item))
			deleted++
		}
	}
	return deleted, nil
}

func toUnstructured(obj client.Object) (*unstructured.Unstructured, error) {
	gvk := obj.GetObjectKind().GroupVersionKind()
	if gvk.Kind == "" {
		return nil, fmt.Errorf("%T %s has no kind set", obj, obj.GetName())
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("converting %s %s: %w", gvk.Kind, obj.GetName(), err)
	}
	// Status and creationTimestamp are the server's; an apply must not
	// claim them.
	delete(m, "status")
	if meta, ok := m["metadata"].(map[string]any); ok {
		delete(meta, "creationTimestamp")
	}
	return &unstructured.Unstructured{Object: m}, nil
}

// hashOf hashes the object as it will be applied. encoding/json sorts map
// keys, so equal objects give equal hashes.
func hashOf(u *unstructured.Unstructured) (string, error) {
	data, err := json.Marshal(u.Object)
	if err != nil {
		return "", fmt.Errorf("hashing %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:12]), nil
}

func withAnnotation(annotations map[string]string, key, value string) map[string]string {
	out := make(map[string]string, len(annotations)+1)
	for k, v := range annotations {
		out[k] = v
	}
	out[key] = value
	return out
}
