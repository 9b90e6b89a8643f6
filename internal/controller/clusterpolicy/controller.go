package clusterpolicy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/apifeatures"
	"github.com/gpu-operator/gpu-operator/internal/apply"
	"github.com/gpu-operator/gpu-operator/internal/cacheconfig"
	"github.com/gpu-operator/gpu-operator/internal/gating"
	"github.com/gpu-operator/gpu-operator/internal/metrics"
	"github.com/gpu-operator/gpu-operator/internal/operandpods"
	"github.com/gpu-operator/gpu-operator/internal/pluginconfig"
	"github.com/gpu-operator/gpu-operator/internal/policy"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/dcgmexporter"
)

// Finalizer keeps a ClusterPolicy until the operator has removed its labels
// from every node and deleted every object it created.
const Finalizer = "nvidia.com/gpu-operator-cleanup"

// cleanupPoll is how often deletion checks whether the nodes are clean.
const cleanupPoll = 2 * time.Second

// +kubebuilder:rbac:groups=nvidia.com,resources=clusterpolicies,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=nvidia.com,resources=clusterpolicies/status,verbs=get;patch
// +kubebuilder:rbac:groups=nvidia.com,resources=clusterpolicies/finalizers,verbs=update
// +kubebuilder:rbac:groups=nvidia.com,resources=nvidiadrivers,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,namespace=gpu-operator,resources=daemonsets;deployments,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch

// Reconciler reconciles the ClusterPolicy into the states' objects.
type Reconciler struct {
	Client client.Client
	// Nodes lists the fleet at each reconcile (cacheconfig.CachedNodes:
	// the cache's own nodes, no copy of each); nil lists through Client.
	Nodes cacheconfig.NodeLister
	// Mapper tells which kinds the API server serves.
	Mapper    meta.RESTMapper
	Graph     *state.Graph
	Namespace string
	Applier   *apply.Applier
	Recorder  events.EventRecorder
	Metrics   *metrics.Metrics
	// Pods are the operand pods; the policy reads the precompiled driver
	// images' checks from them. Nil reads none.
	Pods *operandpods.Index
	// Explain says why each state is not ready on a node, as the node
	// controller decides it; the status quotes it for the nodes it names.
	Explain func(ctx context.Context, node *corev1.Node) (map[state.Name]string, error)
	// GFDLabelsWait bounds how long the cleanup waits for NFD to remove
	// GFD's labels (timers.Timers.GFDLabelsWait).
	GFDLabelsWait time.Duration
	// Now is the clock of the cleanup; time.Now when nil.
	Now func() time.Time
	// InstallBindsOperandClusterRoles leaves the operands' ClusterRoles
	// to the install's bindings (OLM's); otherwise the operator binds each
	// while its operand runs.
	InstallBindsOperandClusterRoles bool
	// DeviceTaints says whether the API server keeps ResourceSlice device
	// taints (apifeatures.DRADeviceTaints), and false for known when it
	// cannot tell; nil never tells.
	DeviceTaints func(ctx context.Context) (on, known bool)

	kindsOnce sync.Once
	kinds     *servedKinds
	// configs remembers the device plugin's files as last judged.
	configs pluginconfig.Judge
	// podSecurity remembers for which policy generation the namespace
	// was labelled.
	podSecurity podSecurityMemo
	// podMetadata remembers the running pods given new metadata.
	podMetadata podMetadataPatched
	// shares keeps what each node adds to the status while it is
	// unchanged.
	shares shares
}

// Reconcile is get, then delete or ignore or apply, then one status patch.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, err error) {
	defer func() { r.Metrics.Reconciles.WithLabelValues("clusterpolicy", metrics.Result(err)).Inc() }()
	cp := &gpuv1.ClusterPolicy{}
	if err := r.Client.Get(ctx, req.NamespacedName, cp); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	active, err := policy.Active(ctx, r.Client)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !cp.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, cp, active)
	}
	if active == nil || active.UID != cp.UID {
		return ctrl.Result{}, r.patchStatus(ctx, cp, ignoredStatus(cp, active, r.Namespace))
	}
	if !controllerutil.ContainsFinalizer(cp, Finalizer) {
		base := cp.DeepCopy()
		controllerutil.AddFinalizer(cp, Finalizer)
		if err := r.Client.Patch(ctx, cp, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
			return ctrl.Result{}, fmt.Errorf("adding the cleanup finalizer: %w", err)
		}
	}

	// Read-only: the cache's nodes, not a copy of each at every reconcile.
	nodes, err := cacheconfig.ListNodes(ctx, r.Nodes, r.Client)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("listing nodes: %w", err)
	}
	// The namespace admits privileged pods before the operands' pods
	// are asked for.
	applyErr := r.labelPodSecurity(ctx, cp)
	morePodMetadata, err := r.applyStates(ctx, cp, nodes)
	applyErr = errors.Join(applyErr, err)
	status, err := r.observe(ctx, cp, nodes, problems{apply: applyErr, missing: r.missing(ctx, cp)})
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.patchStatus(ctx, cp, status); err != nil {
		return ctrl.Result{}, err
	}
	if morePodMetadata && applyErr == nil {
		return ctrl.Result{RequeueAfter: podMetadataRequeue}, nil
	}
	return ctrl.Result{}, applyErr
}

// reconcileDelete cleans up before letting the policy go: the node
// controller removes the node labels as soon as no policy is active; once
// no node carries one and GFD's labels went with GFD (gfdlabels.go), the
// objects are deleted and the finalizer removed.
// If another policy takes over, it takes the nodes and objects as they are:
// the finalizer goes only once the successor's applies made it the owner
// of every object, or the garbage collector would delete every operand
// (every driver unloading under running jobs) before the successor put
// them back.
func (r *Reconciler) reconcileDelete(ctx context.Context, cp *gpuv1.ClusterPolicy, successor *gpuv1.ClusterPolicy) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(cp, Finalizer) {
		return ctrl.Result{}, nil
	}
	if successor != nil {
		if err := r.adoptWorkloadPods(ctx, cp, successor); err != nil {
			return ctrl.Result{}, err
		}
		owned, err := r.objectsOwnedBy(ctx, cp)
		if err != nil {
			return ctrl.Result{}, err
		}
		if owned > 0 {
			ctrl.LoggerFrom(ctx).Info("waiting for the successor to adopt the operator's objects",
				"successor", successor.Name, "objects", owned)
			return ctrl.Result{RequeueAfter: cleanupPoll}, nil
		}
	} else {
		labelled, err := r.nodesNotCleanedUp(ctx)
		if err != nil {
			return ctrl.Result{}, err
		}
		if labelled > 0 {
			ctrl.LoggerFrom(ctx).Info("waiting for the operator's node labels and cordons to be removed", "nodes", labelled)
			return ctrl.Result{RequeueAfter: cleanupPoll}, nil
		}
		gfdLeft, err := r.gfdLeftoversNow(ctx)
		if err != nil {
			return ctrl.Result{}, err
		}
		if !gfdLeft.none() && !r.gfdWaitOver(cp) {
			ctrl.LoggerFrom(ctx).Info("waiting for GFD's pods to go and NFD to remove their labels",
				"pods", gfdLeft.pods, "labelledNodes", len(gfdLeft.labels))
			return ctrl.Result{RequeueAfter: cleanupPoll}, nil
		}
		if err := r.deleteObjects(ctx); err != nil {
			return ctrl.Result{}, err
		}
		if len(gfdLeft.labels) > 0 {
			done, err := r.gfdLabelsLeft(ctx, cp, gfdLeft)
			if err != nil {
				return ctrl.Result{}, err
			}
			if !done {
				return ctrl.Result{RequeueAfter: cleanupPoll}, nil
			}
		}
	}
	base := cp.DeepCopy()
	controllerutil.RemoveFinalizer(cp, Finalizer)
	if err := r.Client.Patch(ctx, cp, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, fmt.Errorf("removing the cleanup finalizer: %w", err)
	}
	return ctrl.Result{}, nil
}

// objectsOwnedBy counts the operator's objects that still name the policy
// as an owner.
func (r *Reconciler) objectsOwnedBy(ctx context.Context, cp *gpuv1.ClusterPolicy) (int, error) {
	n := 0
	for _, gvk := range r.managedKinds() {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := r.Client.List(ctx, list, managedSelector); err != nil {
			return 0, fmt.Errorf("listing %s: %w", gvk.Kind, err)
		}
		for i := range list.Items {
			for _, ref := range list.Items[i].OwnerReferences {
				if ref.UID == cp.UID {
					n++
				}
			}
		}
	}
	return n, nil
}

// nodesNotCleanedUp counts the nodes the node and upgrade controllers have
// not cleaned up yet. Each removes its labels, annotations and cordon in
// one apply, after the readiness and unhealthy taints, so the operator's annotations and
// taint, which no one else sets, tell:
// a state label still there afterwards is a user's own (set with the same
// value, it is shared, and server-side apply leaves it), and waiting for
// it would keep the policy for ever.
func (r *Reconciler) nodesNotCleanedUp(ctx context.Context) (int, error) {
	nodes := &corev1.NodeList{}
	if err := r.Client.List(ctx, nodes, client.UnsafeDisableDeepCopy); err != nil {
		return 0, fmt.Errorf("listing nodes: %w", err)
	}
	n := 0
	for i := range nodes.Items {
		if notCleanedUp(&nodes.Items[i]) {
			n++
		}
	}
	return n, nil
}

// notCleanedUp reports whether a node still carries an annotation or a
// taint the operator sets and must remove.
func notCleanedUp(n *corev1.Node) bool {
	return hasOperatorAnnotation(n.Annotations) || slices.ContainsFunc(n.Spec.Taints, gating.IsOwnReadinessTaint) ||
		slices.ContainsFunc(n.Spec.Taints, gating.IsOwnUnhealthyTaint) || slices.ContainsFunc(n.Spec.Taints, gating.IsOwnMIGTaint) ||
		slices.ContainsFunc(n.Spec.Taints, gating.IsOwnModeSwitchTaint)
}

func hasOperatorAnnotation(annotations map[string]string) bool {
	for k := range annotations {
		if strings.HasPrefix(k, gpuv1.OperatorAnnotationPrefix) || strings.HasPrefix(k, gpuv1.UpgradeAnnotationPrefix) ||
			strings.HasPrefix(k, gpuv1.MIGReconfigureAnnotationPrefix) || strings.HasPrefix(k, gpuv1.MaintenanceAnnotationPrefix) ||
			strings.HasPrefix(k, gpuv1.ModeSwitchAnnotationPrefix) {
			return true
		}
		// A person's approval is theirs to remove.
		if strings.HasPrefix(k, gpuv1.RemediationAnnotationPrefix) && k != gpuv1.AnnotationRemediationApproved {
			return true
		}
	}
	return false
}

// patchStatus writes status when it differs from what is stored: a
// reconcile that changes nothing writes nothing.
func (r *Reconciler) patchStatus(ctx context.Context, cp *gpuv1.ClusterPolicy, status gpuv1.ClusterPolicyStatus) error {
	if equality.Semantic.DeepEqual(cp.Status, status) {
		return nil
	}
	base := cp.DeepCopy()
	cp.Status = status
	if err := r.Client.Status().Patch(ctx, cp, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("patching the status of ClusterPolicy %s: %w", cp.Name, err)
	}
	r.recordTransition(base, cp)
	return nil
}

// recordTransition records an event when the policy's state changes, with
// the Ready condition's words.
func (r *Reconciler) recordTransition(before, after *gpuv1.ClusterPolicy) {
	if before.Status.State == after.Status.State || after.Status.State == "" {
		return
	}
	kind, msg := corev1.EventTypeNormal, string(after.Status.State)
	if c := meta.FindStatusCondition(after.Status.Conditions, gpuv1.ConditionReady); c != nil {
		msg += ": " + c.Message
	}
	if d := meta.FindStatusCondition(after.Status.Conditions, gpuv1.ConditionDegraded); d != nil && d.Status == metav1.ConditionTrue {
		kind = corev1.EventTypeWarning
	}
	r.Recorder.Eventf(after, nil, kind, "StateChanged", "Reconcile", "%s", msg)
}

// missing lists what the policy asks for that the cluster lacks.
func (r *Reconciler) missing(ctx context.Context, cp *gpuv1.ClusterPolicy) []string {
	var out []string
	if cp.Spec.DCGMExporter.IsEnabled() && dcgmexporter.WantsServiceMonitor(&cp.Spec) && !r.served(kindServiceMonitor) {
		out = append(out, "spec.dcgmExporter.serviceMonitor.enabled is true but the ServiceMonitor kind (monitoring.coreos.com/v1) "+
			"is not served: install the Prometheus Operator's CRDs, or set it to false")
	}
	if msg := r.deviceTaintsMissing(ctx, &cp.Spec); msg != "" {
		out = append(out, msg)
	}
	return out
}

// +kubebuilder:rbac:urls=/metrics,verbs=get

// deviceTaintsMissing says what is lost where the DRA driver's health
// check publishes device taints (its NVMLDeviceHealthCheck gate) and the
// API server drops them: its DRADeviceTaints gate is off, the default
// before Kubernetes 1.36. An unhealthy GPU then stays in the slices
// untainted: schedulable, and unseen by the operator's health machinery
// (draslices reads the taints).
func (r *Reconciler) deviceTaintsMissing(ctx context.Context, spec *gpuv1.ClusterPolicySpec) string {
	if r.DeviceTaints == nil || !spec.DRADriver.FeatureGate(draHealthGate) {
		return ""
	}
	if on, known := r.DeviceTaints(ctx); !known || on {
		return ""
	}
	return "spec.draDriver.featureGates." + draHealthGate + " is true but the API server drops the device taints it publishes " +
		"(feature gate " + apifeatures.DRADeviceTaints + " off, the default before Kubernetes 1.36): an unhealthy GPU stays " +
		"schedulable. Enable " + apifeatures.DRADeviceTaints + " on kube-apiserver, kube-scheduler and kube-controller-manager " +
		"and restart the operator, or accept GPUs unchecked"
}

// draHealthGate is the DRA driver's gate that publishes GPU health as
// device taints (dra-driver-nvidia-gpu pkg/featuregates/featuregates.go).
const draHealthGate = "NVMLDeviceHealthCheck"

// observe computes the status from the nodes' labels.
func (r *Reconciler) observe(ctx context.Context, cp *gpuv1.ClusterPolicy, nodes []*corev1.Node, p problems) (gpuv1.ClusterPolicyStatus, error) {
	nfd := &appsv1.DaemonSet{}
	nfdErr := r.Client.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: nfdWorkerName}, nfd)
	if client.IgnoreNotFound(nfdErr) != nil {
		return cp.Status, fmt.Errorf("reading the nfd-worker DaemonSet: %w", nfdErr)
	}
	if nfdErr != nil {
		nfd = nil
	}
	summary := summarizeShares(r.Graph, r.Graph.Enabled(&cp.Spec), nodes, r.shares.of(r.Graph, r.Graph.PerNode(), nodes), nfd)
	if err := r.explain(ctx, &summary, nodes); err != nil {
		return cp.Status, err
	}
	r.export(summary)
	return buildStatus(cp, r.Namespace, summary, p), nil
}

// explain finds why the states are not ready on the nodes the status
// names: a handful of pure decisions on cached objects.
func (r *Reconciler) explain(ctx context.Context, s *summary, nodes []*corev1.Node) error {
	named := s.namedNodes()
	if r.Explain == nil || len(named) == 0 {
		return nil
	}
	s.why = map[string]map[state.Name]string{}
	for i := range nodes {
		if !named[nodes[i].Name] {
			continue
		}
		why, err := r.Explain(ctx, nodes[i])
		if err != nil {
			return err
		}
		s.why[nodes[i].Name] = why
	}
	return nil
}

// phases are the values of a state label, each a series of the nodes
// gauge.
var phases = []gpuv1.StateValue{gpuv1.StatePending, gpuv1.StateReady, gpuv1.StateFailed, gpuv1.StateUpgrading, gpuv1.StateDisabled}

// export publishes the node counts as metrics. Every series is set in
// place, zero included, never reset and filled again: a scrape between
// the two would see no node at all.
func (r *Reconciler) export(s summary) {
	r.Metrics.GPUNodes.Set(float64(s.gpuNodes))
	unhealthy := make(map[string]float64, len(s.unhealthy))
	for n, v := range s.unhealthy {
		unhealthy[n] = float64(v)
	}
	r.Metrics.UnhealthyGPUs.Set(unhealthy)
	notReady := make(map[[2]string]float64, len(s.firstNotUp))
	for n, st := range s.firstNotUp {
		notReady[[2]string{n, string(st)}] = 1
	}
	r.Metrics.NotReadyNodes.Set(notReady)
	poolNodes, poolReady := make(map[string]float64, len(s.pools)), make(map[string]float64, len(s.pools))
	for name, p := range s.pools {
		poolNodes[name], poolReady[name] = float64(p.nodes), float64(p.ready)
	}
	r.Metrics.PoolNodes.Set(poolNodes)
	r.Metrics.PoolReadyNodes.Set(poolReady)
	operations := make(map[[2]string]float64, len(s.operations))
	for k, v := range s.operations {
		operations[k] = float64(v)
	}
	r.Metrics.MaintenanceNodes.Set(operations)
	r.Metrics.MaintenanceWaiting.Set(float64(len(s.waiting)))
	for name, counts := range s.byState {
		for _, phase := range phases {
			r.Metrics.Nodes.WithLabelValues(string(name), string(phase)).Set(float64(counts.phases[phase]))
		}
	}
}
