package clusterpolicy

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/apply"
	"github.com/gpu-operator/gpu-operator/internal/driverpool"
	"github.com/gpu-operator/gpu-operator/internal/gating"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/dcgmexporter"
	"github.com/gpu-operator/gpu-operator/internal/state/driver"
	"github.com/gpu-operator/gpu-operator/internal/state/nfd"
	"github.com/gpu-operator/gpu-operator/internal/state/toolkit"
)

const nfdWorkerName = nfd.WorkerName

var kindServiceMonitor = render.KindServiceMonitor

// managedSelector selects every object the operator created.
var managedSelector = client.MatchingLabels{render.LabelManagedBy: render.ManagedBy}

// rendered is every state's objects for a policy.
type rendered struct {
	// wanted are the objects of enabled states, to apply.
	wanted []client.Object
	// kinds are the served kinds any state can render, enabled or not: the
	// kinds to look through when pruning.
	kinds []schema.GroupVersionKind
	// heldPools are the driver pools that could not render: their
	// DaemonSets stay as they are, and problems says why.
	heldPools []string
	problems  []error
	// keptDaemonSets are the precompiled kernels' DaemonSets that stay as
	// they are until their new image is found.
	keptDaemonSets []string
	// holdExporter keeps dcgm-exporter's DaemonSets as they are: its
	// metrics list cannot be read.
	holdExporter bool
}

// renderAll renders the enabled states from the policy and what the cluster
// looks like (the GPU nodes' operating systems, the kinds served).
func (r *Reconciler) renderAll(ctx context.Context, cp *gpuv1.ClusterPolicy, nodes []*corev1.Node) (*rendered, error) {
	inUse := variants(cp, nodes)
	configs, err := r.devicePluginConfigs(ctx, cp, inUse)
	if err != nil {
		return nil, err
	}
	metrics, metricsProblem, err := r.dcgmMetrics(ctx, cp)
	if err != nil {
		return nil, err
	}
	pools, err := driverpool.Load(ctx, r.Client, cp, r.Pods)
	if err != nil {
		return nil, err
	}
	groups, failed, err := r.readModuleParams(ctx, pools.GroupsOf(nodes, isGPUNode))
	if err != nil {
		return nil, err
	}
	toolkitPods, err := r.Pods.OfState(state.ContainerToolkit)
	if err != nil {
		return nil, err
	}
	in := state.RenderInput{Policy: cp, Namespace: r.Namespace, ServiceMonitorAvailable: r.served(kindServiceMonitor),
		DriverPools: groups, Variants: inUse, DevicePluginConfigDigests: configs.digests, MPSConfigs: configs.mps,
		DRAInUse: (pools.UsesDRA() || draNodes(nodes)) && r.served(render.KindDeviceClass), DRADriver: pools.DRADriver(),
		DCGMMetrics: metrics, NRIPluginPods: toolkit.NRIPluginPodsLeft(toolkitPods),
		BindsOperandClusterRoles: !r.InstallBindsOperandClusterRoles}
	out := &rendered{kinds: r.managedKinds()}
	if metricsProblem != nil {
		// Without a list, not even a last good one, the exporters stay
		// as they are.
		out.holdExporter = metrics == ""
		out.problems = append(out.problems, metricsProblem)
	}
	if pools.UsesDRA() && !in.DRAInUse {
		undo := "set the pool's allocationMode to device-plugin"
		if pools.GPUCluster != "" {
			undo = "delete GPUCluster " + pools.GPUCluster + ", which puts every pool in allocation mode dra"
		}
		out.problems = append(out.problems, errors.New("a driver pool is in allocation mode dra, but the API server does not serve "+
			"resource.k8s.io/v1 (Kubernetes 1.34 and later): its nodes run no GPU plugin. Upgrade the cluster and restart the "+
			"operator, or "+undo))
	}
	for pool, err := range failed {
		out.heldPools = append(out.heldPools, pool)
		out.problems = append(out.problems, err)
	}
	for _, g := range groups {
		if !cp.Spec.Driver.IsEnabled() {
			break // the driver's objects all go
		}
		for _, k := range g.KeptKernels {
			out.keptDaemonSets = append(out.keptDaemonSets, driver.PrecompiledDaemonSetOf(g.Name, k))
		}
	}
	slices.Sort(out.heldPools)
	for _, s := range r.Graph.States() {
		if !s.Operand.Enabled(&cp.Spec) {
			continue
		}
		in.Gate, in.GateEither = r.Graph.Gate(s.Name), r.Graph.GateEither(s.Name)
		objs, err := s.Operand.Render(in)
		if err != nil {
			return nil, fmt.Errorf("rendering state %s: %w", s.Name, err)
		}
		out.wanted = append(out.wanted, objs...)
	}
	if configs.validated != nil {
		// Before the pods that mount it.
		out.wanted = append([]client.Object{configs.validated}, out.wanted...)
	}
	// RuntimeClasses first: pods naming a class that does not exist yet
	// are refused.
	out.wanted = append(render.RuntimeClasses(cp, out.wanted, toolkitRegistersHandler(cp, in.Variants)), out.wanted...)
	return out, nil
}

// managedKinds are the served kinds of every object a state may render:
// where the operator's objects are found to prune or delete, whatever the
// policy says (a policy that no longer renders must still be cleaned up).
func (r *Reconciler) managedKinds() []schema.GroupVersionKind {
	var kinds []schema.GroupVersionKind
	seen := map[schema.GroupVersionKind]bool{}
	if r.served(render.KindRuntimeClass) {
		seen[render.KindRuntimeClass] = true
		kinds = append(kinds, render.KindRuntimeClass)
	}
	for _, s := range r.Graph.States() {
		for _, gvk := range s.Operand.Kinds() {
			if !seen[gvk] && r.served(gvk) {
				seen[gvk] = true
				kinds = append(kinds, gvk)
			}
		}
	}
	return kinds
}

// draNodes reports whether some node is, or is being switched, out of the
// device plugin's mode: its DRA driver stays until the switch takes it off
// the node, whatever its pool now says, and pruning the driver's objects
// would take it from under the pods that hold its GPUs.
func draNodes(nodes []*corev1.Node) bool {
	for i := range nodes {
		for _, m := range []string{nodes[i].Annotations[gating.AnnotationAllocationMode], nodes[i].Labels[gpuv1.LabelAllocationMode]} {
			if m == string(gpuv1.AllocationDRA) || m == string(gpuv1.AllocationNone) {
				return true
			}
		}
	}
	return false
}

// toolkitRegistersHandler reports whether the toolkit registers the NVIDIA
// runtime handler on some node: it is enabled, and some variant in use
// runs a runtime configured with a handler.
func toolkitRegistersHandler(cp *gpuv1.ClusterPolicy, variants []state.Variant) bool {
	if !cp.Spec.Toolkit.IsEnabled() || cp.Spec.CDI.UsesNRI() {
		// With NRI the toolkit writes no runtime config.
		return false
	}
	for _, v := range variants {
		if state.HasRuntimeHandler(&cp.Spec, v.Runtime) {
			return true
		}
	}
	return false
}

// variants returns the node variants in use among the GPU nodes, as their
// labels say, the policy's default first.
func variants(cp *gpuv1.ClusterPolicy, nodes []*corev1.Node) []state.Variant {
	var seen []state.Variant
	for i := range nodes {
		if !gating.IsGPUNode(nodes[i]) {
			continue
		}
		if v, ok := state.VariantOfLabels(nodes[i].Labels); ok {
			seen = append(seen, v)
		}
	}
	return state.Variants(state.DefaultVariant(&cp.Spec), seen)
}

// served reports whether the API server serves a kind; the Prometheus
// Operator's ServiceMonitor, for one, may be missing.
func (r *Reconciler) served(gvk schema.GroupVersionKind) bool {
	r.kindsOnce.Do(func() { r.kinds = newServedKinds(r.Mapper) })
	return r.kinds.served(gvk)
}

// applyStates applies the objects of enabled states and prunes the rest.
// Nothing is pruned when rendering failed: a policy the renderer cannot
// handle must not take down what runs. more reports running pods whose
// new metadata waits for the next pass.
func (r *Reconciler) applyStates(ctx context.Context, cp *gpuv1.ClusterPolicy, nodes []*corev1.Node) (more bool, err error) {
	objs, err := r.renderAll(ctx, cp, nodes)
	if err != nil {
		return false, err
	}
	keep := make(map[apply.Key]bool, len(objs.wanted))
	errs := slices.Clone(objs.problems)
	if err := r.keepPools(ctx, objs.heldPools, keep); err != nil {
		return false, err
	}
	for _, name := range objs.keptDaemonSets {
		keep[apply.Key{GVK: render.KindDaemonSet, NamespacedName: types.NamespacedName{Namespace: r.Namespace, Name: name}}] = true
	}
	if objs.holdExporter {
		// The held exporters may mount the copy of their list as it is,
		// whatever it holds now.
		keep[apply.Key{GVK: render.KindConfigMap, NamespacedName: types.NamespacedName{Namespace: r.Namespace, Name: dcgmexporter.MetricsCopy}}] = true
	}
	applied, applyErrs := r.applyWanted(ctx, objs.wanted, keep, func(o client.Object) bool { return objs.holdExporter && isExporterDaemonSet(o) })
	errs = append(errs, applyErrs...)
	more, metaErr := r.updateRunningPodMetadata(ctx, applied)
	if metaErr != nil {
		errs = append(errs, metaErr)
	}
	if _, err := r.Applier.Prune(ctx, objs.kinds, managedSelector, keep, driverReplacement(cp)); err != nil {
		errs = append(errs, err)
	}
	return more, errors.Join(errs...)
}

// applyWanted applies the wanted objects in order, each added to keep,
// but those held, which stay as they are; it returns those applied. The
// DaemonSets that read the validated device plugin configurations wait
// while those could not be written: their templates name the new files'
// digests, and applied before the files, their new pods would read the
// old ones and never restart for the new. Those that run the NRI plugin
// wait while its admission guard could not be applied, and dcgm-exporter's
// while the copy of its metrics list they mount could not be.
func (r *Reconciler) applyWanted(ctx context.Context, wanted []client.Object, keep map[apply.Key]bool,
	held func(client.Object) bool) ([]client.Object, []error) {
	var errs []error
	var applied []client.Object
	validatedFailed, guardFailed, metricsFailed := false, false, false
	for _, o := range wanted {
		keep[apply.KeyOf(o)] = true
		if (validatedFailed && readsValidatedConfigs(o)) || (guardFailed && runsNRIPlugin(o)) || (metricsFailed && isExporterDaemonSet(o)) ||
			(held != nil && held(o)) {
			continue // as it is, until the next pass
		}
		_, err := r.Applier.Apply(ctx, o)
		if foreign := (*apply.ForeignError)(nil); errors.As(err, &foreign) {
			err = r.usableAsItIs(ctx, o, foreign)
		}
		if err != nil {
			validatedFailed = validatedFailed || isValidatedConfigs(o)
			guardFailed = guardFailed || r.isNRIGuard(o)
			metricsFailed = metricsFailed || isMetricsCopy(o)
			errs = append(errs, err)
			continue
		}
		applied = append(applied, o)
	}
	return applied, errs
}

// usableAsItIs decides about an object someone else made where the
// operator would create its own. A ServiceAccount of an operand's name
// serves as well as ours (OLM creates those its CSV grants cluster roles
// to; pods set their own token mounting). A RuntimeClass of the name GPU
// pods use, with the handler the toolkit registers (k3s ships one), serves
// as well as ours. Anything else is an error that says what to change.
func (r *Reconciler) usableAsItIs(ctx context.Context, o client.Object, foreign *apply.ForeignError) error {
	if _, ok := o.(*corev1.ServiceAccount); ok {
		return nil
	}
	rc, ok := o.(*nodev1.RuntimeClass)
	if !ok {
		return fmt.Errorf("%w: delete it, or rename what the ClusterPolicy would create", foreign)
	}
	live := &nodev1.RuntimeClass{}
	if err := r.liveReader().Get(ctx, client.ObjectKeyFromObject(rc), live); err != nil {
		return fmt.Errorf("reading RuntimeClass %s: %w", rc.Name, err)
	}
	if live.Handler != rc.Handler {
		return fmt.Errorf("RuntimeClass %s exists, not created by the operator, with handler %q, but the toolkit registers %q: "+
			"pods naming it would not get the NVIDIA runtime; delete it, or set spec.operator.runtimeClass to another name",
			rc.Name, live.Handler, rc.Handler)
	}
	return nil
}

// deleteObjects deletes every object the operator created: every kind any
// state renders is looked through, so no node is needed to render.
func (r *Reconciler) deleteObjects(ctx context.Context) error {
	_, err := r.Applier.Prune(ctx, r.managedKinds(), managedSelector, nil, nil)
	return err
}

// driverReplacement says which pruned objects leave their pods running: a
// driver DaemonSet pruned while the driver stays enabled is being replaced
// by another (a pool's nodes moved, a version switched between a tag and a
// digest renames the DaemonSet). Deleting its pods would unload every
// driver of the pool at once under running workloads; orphaned, each is
// replaced node by node through the upgrade state machine, which sees a
// driver pod without a DaemonSet as outdated.
func driverReplacement(cp *gpuv1.ClusterPolicy) func(*metav1.PartialObjectMetadata) bool {
	if !cp.Spec.Driver.IsEnabled() {
		return nil
	}
	return func(o *metav1.PartialObjectMetadata) bool {
		return o.GetObjectKind().GroupVersionKind() == render.KindDaemonSet && o.Labels[render.LabelState] == string(state.Driver)
	}
}

// keepPools adds the live driver DaemonSets of the held pools to keep.
func (r *Reconciler) keepPools(ctx context.Context, pools []string, keep map[apply.Key]bool) error {
	if len(pools) == 0 {
		return nil
	}
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(render.KindDaemonSet.GroupVersion().WithKind("DaemonSetList"))
	if err := r.Client.List(ctx, list, client.InNamespace(r.Namespace), client.MatchingLabels{render.LabelState: string(state.Driver)}); err != nil {
		return fmt.Errorf("listing the driver DaemonSets of held pools: %w", err)
	}
	for i := range list.Items {
		// One without the label is older than it: kept too, as it may
		// be a held pool's.
		if pool, ok := list.Items[i].Labels[gpuv1.LabelDriverPool]; !ok || slices.Contains(pools, pool) {
			list.Items[i].SetGroupVersionKind(render.KindDaemonSet)
			keep[apply.KeyOf(&list.Items[i])] = true
		}
	}
	return nil
}

func isGPUNode(n *corev1.Node) bool { return gating.IsGPUNode(n) }
