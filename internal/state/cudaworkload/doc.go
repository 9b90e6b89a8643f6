// Package cudaworkload is the workload proof, the cuda-workload state: on
// each node whose device plugin is ready, the node controller runs one pod
// that asks for one GPU through the device plugin, as workloads do, and
// runs NVIDIA's CUDA sample (vectorAdd) from the validator image. Its end
// is the state's verdict. The package builds the pod and reads its end;
// it renders no shared objects.
package cudaworkload
