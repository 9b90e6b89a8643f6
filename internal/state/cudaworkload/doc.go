// Package cudaworkload is the workload proof, the cuda-workload state: on
// each node whose GPU plugin is ready, the node controller runs one pod
// that asks for one GPU the way workloads do there, and runs NVIDIA's CUDA
// sample (vectorAdd) from the validator image. Its end is the state's
// verdict. On a node of the device plugin the pod asks for the extended
// resource the plugin advertises, and is bound to the node by name; on a
// node of a DRA pool it claims a device through a ResourceClaimTemplate
// of the operator's, and the scheduler places it on the node and
// allocates the device there. The package builds the pod and reads its
// end, and renders what the DRA pods need: the claim templates and a
// PriorityClass that never preempts.
package cudaworkload
