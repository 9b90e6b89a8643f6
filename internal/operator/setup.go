package operator

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/gpu-operator/gpu-operator/internal/apifeatures"
	"github.com/gpu-operator/gpu-operator/internal/apply"
	"github.com/gpu-operator/gpu-operator/internal/cacheconfig"
	"github.com/gpu-operator/gpu-operator/internal/controller/clusterpolicy"
	"github.com/gpu-operator/gpu-operator/internal/controller/gpucluster"
	"github.com/gpu-operator/gpu-operator/internal/controller/imagecheck"
	"github.com/gpu-operator/gpu-operator/internal/controller/maintenance"
	"github.com/gpu-operator/gpu-operator/internal/controller/node"
	"github.com/gpu-operator/gpu-operator/internal/controller/nvidiadriver"
	"github.com/gpu-operator/gpu-operator/internal/draslices"
	"github.com/gpu-operator/gpu-operator/internal/metrics"
	"github.com/gpu-operator/gpu-operator/internal/operandpods"
	"github.com/gpu-operator/gpu-operator/internal/state/registry"
	"github.com/gpu-operator/gpu-operator/internal/timers"
)

// FieldOwner is the server-side apply field manager of every write.
const FieldOwner = "gpu-operator"

// Limits of the manager's work.
const (
	// ReconcileTimeout bounds one reconcile: a call the API server never
	// answers must not hold a worker for ever. The longest legitimate one,
	// an upgrade pass over a pool, makes bounded calls (evictions of two
	// seconds each, side by side) well within it.
	ReconcileTimeout = 2 * time.Minute
	// ShutdownTimeout is how long the manager waits for its reconciles to
	// end on SIGTERM, before releasing its leader lease. The pod's
	// terminationGracePeriodSeconds must be longer (a packaging test pins
	// it), or the kubelet kills it first and the next leader waits out the
	// lease.
	ShutdownTimeout = 30 * time.Second
)

// Config is what the controllers need besides the manager.
type Config struct {
	// Namespace is where the operator runs and deploys its operands.
	Namespace string
	// NodeWorkers is how many nodes are reconciled at once.
	NodeWorkers int
	// WorkloadProofs bounds the CUDA workload pods running at once.
	WorkloadProofs int
	// Timers are the waits of the controllers' machines.
	Timers  timers.Timers
	Metrics *metrics.Metrics
	// Now is the clock of the node controller; time.Now when nil.
	Now func() time.Time
	// InstallBindsOperandClusterRoles is true where the install binds the
	// operands' ClusterRoles itself (OLM's clusterPermissions), and the
	// operator binds none; otherwise it binds each while its operand runs.
	InstallBindsOperandClusterRoles bool
	// TrimNode is the cache's node transform (cacheconfig.NodeTrimmer):
	// the maintenance controller keeps the nodes it wrote as the cache
	// would. Nil keeps them whole.
	TrimNode func(*corev1.Node) *corev1.Node
	// Nodes lists the fleet for the controllers that look at all of it at
	// once; nil lists the manager cache's own nodes (cacheconfig.CachedNodes).
	Nodes cacheconfig.NodeLister
}

// Setup registers the operand pods index and the controllers with mgr.
func Setup(mgr ctrl.Manager, cfg Config) error {
	graph, err := registry.Graph()
	if err != nil {
		return fmt.Errorf("building the state graph: %w", err)
	}
	pods, err := operandpods.ForNamespace(mgr.GetConfig(), cfg.Namespace)
	if err != nil {
		return err
	}
	if err := mgr.Add(pods); err != nil {
		return fmt.Errorf("adding the operand pods index: %w", err)
	}
	slices, err := draSlices(mgr)
	if err != nil {
		return err
	}
	recorder, err := eventRecorder(mgr)
	if err != nil {
		return err
	}
	apiServer, err := discovery.NewDiscoveryClientForConfig(mgr.GetConfig())
	if err != nil {
		return fmt.Errorf("building a client of the API server's own paths: %w", err)
	}
	deviceTaints := &apifeatures.Gate{Client: apiServer.RESTClient(), Name: apifeatures.DRADeviceTaints, Now: cfg.Now}
	nodes := &node.Reconciler{
		Client:     mgr.GetClient(),
		Pods:       pods,
		Slices:     slices,
		Graph:      graph,
		Namespace:  cfg.Namespace,
		Timers:     cfg.Timers,
		Recorder:   recorder,
		Metrics:    cfg.Metrics,
		FieldOwner: FieldOwner,
		Now:        cfg.Now,

		WorkloadProofs: cfg.WorkloadProofs,
	}
	if err := nodes.SetupWithManager(mgr, cfg.NodeWorkers); err != nil {
		return fmt.Errorf("setting up the node controller: %w", err)
	}
	// The controllers that look at the whole fleet at once read the
	// cache's nodes as it holds them.
	fleet := cfg.Nodes
	if fleet == nil {
		fleet = cacheconfig.CachedNodes{Informers: mgr.GetCache()}
	}
	policies := &clusterpolicy.Reconciler{
		Client:    mgr.GetClient(),
		Nodes:     fleet,
		Mapper:    mgr.GetRESTMapper(),
		Graph:     graph,
		Namespace: cfg.Namespace,
		Applier: &apply.Applier{Client: mgr.GetClient(), Reader: mgr.GetClient(), Live: mgr.GetAPIReader(),
			Owner: FieldOwner},
		Recorder:      recorder,
		Metrics:       cfg.Metrics,
		Pods:          pods,
		Explain:       nodes.Explain,
		GFDLabelsWait: cfg.Timers.GFDLabelsWait,
		Now:           cfg.Now,

		InstallBindsOperandClusterRoles: cfg.InstallBindsOperandClusterRoles,
		DeviceTaints:                    deviceTaints.Enabled,
	}
	if err := policies.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the ClusterPolicy controller: %w", err)
	}
	drivers := &nvidiadriver.Reconciler{Client: mgr.GetClient(), Namespace: cfg.Namespace, Recorder: recorder, Pods: pods}
	if err := drivers.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the NVIDIADriver controller: %w", err)
	}
	clusters := &gpucluster.Reconciler{Client: mgr.GetClient(), Namespace: cfg.Namespace, Recorder: recorder, DRAServed: slices != nil}
	if err := clusters.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the GPUCluster controller: %w", err)
	}
	checks := &imagecheck.Reconciler{Client: mgr.GetClient(), Pods: pods, Namespace: cfg.Namespace}
	if err := checks.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the precompiled image check controller: %w", err)
	}
	upgrades := &maintenance.Reconciler{
		Client:    mgr.GetClient(),
		Nodes:     fleet,
		Pods:      pods,
		APIReader: mgr.GetAPIReader(),
		TrimNode:  cfg.TrimNode,
		Graph:     graph,
		Namespace: cfg.Namespace,
		Recorder:  recorder,
		Metrics:   cfg.Metrics,
		Timers:    cfg.Timers,
		Now:       cfg.Now,
	}
	if slices != nil {
		upgrades.Slices = slices // a nil index is no reader
	}
	if err := upgrades.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the maintenance controller: %w", err)
	}
	return nil
}

// draSlices registers the index of the DRA driver's ResourceSlices where
// the API server serves resource.k8s.io/v1 (Kubernetes 1.34 and later),
// and returns nil elsewhere: nodes of a DRA pool then say why their DRA
// driver cannot run. A cluster upgraded to serve them is seen once the
// operator restarts.
func draSlices(mgr ctrl.Manager) (*draslices.Index, error) {
	_, err := mgr.GetRESTMapper().RESTMapping(schema.GroupKind{Group: resourcev1.GroupName, Kind: "ResourceSlice"}, "v1")
	switch {
	case meta.IsNoMatchError(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("finding whether the API server serves ResourceSlices: %w", err)
	}
	slices, err := draslices.ForConfig(mgr.GetConfig())
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(slices); err != nil {
		return nil, fmt.Errorf("adding the resource slices index: %w", err)
	}
	return slices, nil
}
