{{/* The name of the operator's objects. */}}
{{- define "gpu-operator.fullname" -}}
gpu-operator
{{- end }}

{{/* Labels of every object of the chart. */}}
{{- define "gpu-operator.labels" -}}
app.kubernetes.io/name: gpu-operator
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: gpu-operator
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}

{{/* Labels the operator Deployment selects its pod by. */}}
{{- define "gpu-operator.selectorLabels" -}}
app.kubernetes.io/name: gpu-operator
app.kubernetes.io/component: operator
{{- end }}

{{/* Labels of a hook Job's pods: never the operator's selector, which the
Deployment and the metrics Service select on. */}}
{{- define "gpu-operator.hookPodLabels" -}}
app.kubernetes.io/name: gpu-operator
app.kubernetes.io/component: {{ . }}
{{- end }}

{{/* The operator image reference. A values file reused from NVIDIA's chart
names NVIDIA's operator image (nvcr.io/nvidia/gpu-operator), which is not
this operator: that one is replaced by this chart's default. */}}
{{- define "gpu-operator.image" -}}
{{- $o := .Values.operator -}}
{{- if include "gpu-operator.nvidiaOperatorImage" . -}}
{{- printf "ghcr.io/gpu-operator/gpu-operator:v%s" .Chart.AppVersion -}}
{{- else -}}
{{- $tag := $o.version | default (printf "v%s" .Chart.AppVersion) -}}
{{- printf "%s/%s%s%s" $o.repository $o.image (ternary "@" ":" (hasPrefix "sha256:" $tag)) $tag -}}
{{- end -}}
{{- end }}

{{/* Non-empty when the operator image values name NVIDIA's operator. */}}
{{- define "gpu-operator.nvidiaOperatorImage" -}}
{{- if and (eq .Values.operator.repository "nvcr.io/nvidia") (eq .Values.operator.image "gpu-operator") }}true{{ end -}}
{{- end }}

{{/* The log level: NVIDIA's operator.logging.level where set, else
operator.logLevel. The operator logs at info and error only (logr has no
warning level), so warn logs what error does. */}}
{{- define "gpu-operator.logLevel" -}}
{{- $level := (.Values.operator.logging | default dict).level | default .Values.operator.logLevel -}}
{{- ternary "error" $level (eq $level "warn") -}}
{{- end }}

{{/* Whether uninstall deletes the CRDs: crds.deleteOnUninstall, or NVIDIA's
operator.cleanupCRD. */}}
{{- define "gpu-operator.deleteCRDs" -}}
{{- if or .Values.crds.deleteOnUninstall .Values.operator.cleanupCRD }}true{{ end -}}
{{- end }}

{{/* Whether the chart creates the ClusterPolicy: clusterPolicy.create, unless
NVIDIA's clusterPolicy.deployCR is false. NVIDIA's chart wants deployCR false
beside gpuCluster.deployCR, and its GPUCluster replaces the ClusterPolicy;
here the GPUCluster lies over the ClusterPolicy, which runs the rest of the
stack, so it is created all the same. */}}
{{- define "gpu-operator.createsClusterPolicy" -}}
{{- $gc := .Values.gpuCluster | default dict -}}
{{- if and .Values.clusterPolicy.create (or (ne (toString .Values.clusterPolicy.deployCR) "false") $gc.deployCR) }}true{{ end -}}
{{- end }}

{{/* "true" when a value holds anything: a true, a non-empty string or
number, or such a value anywhere inside a map or list. */}}
{{- define "gpu-operator.anySet" -}}
{{- if kindIs "map" . -}}
{{- range $_, $v := . }}{{ include "gpu-operator.anySet" $v }}{{ end -}}
{{- else if kindIs "slice" . -}}
{{- if gt (len .) 0 }}true{{ end -}}
{{- else if . -}}
true
{{- end -}}
{{- end }}

{{/* "true" when the values name NVIDIA's validator image of charts before
v25.10 (cloud-native/gpu-operator-validator) without a version: that image
has no tag of the version the policy would default to, so the CUDA workload
runs the default image (gpu-operator, which holds the same vectorAdd). */}}
{{- define "gpu-operator.oldValidatorImage" -}}
{{- $v := .Values.validator | default dict -}}
{{- if and (eq (toString $v.image) "gpu-operator-validator") (not $v.version) }}true{{ end -}}
{{- end }}

{{/* The values of NVIDIA's chart that this chart accepts and ignores,
with why, each listed when it holds anything. */}}
{{- define "gpu-operator.ignoredValues" -}}
{{- $v := .Values -}}
{{- $o := $v.operator -}}
{{- $d := $v.driver -}}
{{- $ignored := dict
  "platform" (list $v.platform "OpenShift's SCC is not created; OpenShift is not supported")
  "cdi.default" (list ($v.cdi | default dict).default "deprecated by NVIDIA since v25.10; CDI mode follows cdi.enabled")
  "validator.image" (list (include "gpu-operator.oldValidatorImage" .) "gpu-operator-validator has no tag of this release: the CUDA workload runs nvcr.io/nvidia/gpu-operator; set validator.version to keep that image")
  "gds.args" (list ($v.gds | default dict).args "NVIDIA's operator does not pass them either")
  "gdrcopy.args" (list ($v.gdrcopy | default dict).args "NVIDIA's operator does not pass them either")
  "dcgm.hostPort" (list ($v.dcgm | default dict).hostPort "deprecated by NVIDIA: the host engine listens on 5555 behind Service nvidia-dcgm")
  "nodeStatusExporter" (list $v.nodeStatusExporter "node status is in the node labels nvidia.com/gpu.state.*")
  "sandboxWorkloads" (list $v.sandboxWorkloads "VM passthrough and vGPU are not supported")
  "vgpuManager" (list $v.vgpuManager "vGPU is not supported")
  "vgpuDeviceManager" (list $v.vgpuDeviceManager "vGPU is not supported")
  "vfioManager" (list $v.vfioManager "VM passthrough is not supported")
  "sandboxDevicePlugin" (list $v.sandboxDevicePlugin "VM passthrough is not supported")
  "kataManager" (list $v.kataManager "Kata containers are not supported")
  "ccManager" (list $v.ccManager "confidential computing is not supported")
  "node-feature-discovery" (list (index $v "node-feature-discovery") "the operator deploys and configures NFD itself (nfd.enabled)")
  "nfd.nodefeaturerules" (list $v.nfd.nodefeaturerules "no NodeFeatureRules are created")
  "operator.upgradeCRD" (list (ternary true nil (eq ($o.upgradeCRD | toString) "false")) "the setup hook always applies the CRD; upgradeCRD=false is not honoured")
  "operator.initContainer" (list $o.initContainer "no init container runs")
  "operator.use_ocp_driver_toolkit" (list $o.use_ocp_driver_toolkit "OpenShift's driver toolkit is not supported")
  "driver.nvidiaDriverCRD.nodeSelector" (list ($d.nvidiaDriverCRD | default dict).nodeSelector "a default NVIDIADriver takes the GPU nodes no other selects and has no nodeSelector")
  "driver.manager" (list (omit ($d.manager | default dict) "env") "no k8s-driver-manager container runs: its env's eviction settings are honoured for a driver pod replaced by hand, its image is not used")
  "driver.licensingConfig" (list $d.licensingConfig "vGPU licensing is not supported")
  "driver.virtualTopology" (list $d.virtualTopology "vGPU is not supported")
  "devicePlugin.mps" (list (ternary nil $v.devicePlugin.mps (eq ((($v.devicePlugin.mps | default dict).root) | toString) "/run/nvidia/mps")) "MPS is not supported yet")
  "dcgmExporter.enablePodLabels" (list $v.dcgmExporter.enablePodLabels "metrics are not labelled with pod labels: it gives every exporter a token that reads every pod in the cluster")
  "dcgmExporter.enablePodUID" (list $v.dcgmExporter.enablePodUID "metrics are not labelled with pod UIDs: it gives every exporter a token that reads every pod in the cluster")
  "dcgmExporter.podLabelAllowlistRegex" (list $v.dcgmExporter.podLabelAllowlistRegex "metrics are not labelled with pod labels")
  "operator.env" (list $o.env "the operator's env is fixed")
  "operator.defaultGPUMode" (list $o.defaultGPUMode "VM passthrough and vGPU are not supported")
  "kataSandboxDevicePlugin" (list $v.kataSandboxDevicePlugin "Kata containers are not supported")
  "extraObjects" (list $v.extraObjects "extra manifests are not rendered")
-}}
{{- range $key := keys $ignored | sortAlpha }}
{{- $entry := index $ignored $key }}
{{- if include "gpu-operator.anySet" (first $entry) }}
  {{ $key }}: {{ last $entry }}
{{- end }}
{{- end }}
{{- end }}

{{/* An operand section of the ClusterPolicy spec, from its values: the
     shared fields, leaving out empty ones so that the CRD's defaults apply. */}}
{{- define "gpu-operator.component" -}}
enabled: {{ .enabled }}
{{- with .repository }}
repository: {{ . | quote }}
{{- end }}
{{- with .image }}
image: {{ . | quote }}
{{- end }}
{{- with .version }}
version: {{ . | quote }}
{{- end }}
{{- with .imagePullPolicy }}
imagePullPolicy: {{ . }}
{{- end }}
{{- with .imagePullSecrets }}
imagePullSecrets: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .env }}
env: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .args }}
args: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .resources }}
resources: {{- toYaml . | nindent 2 }}
{{- end }}
{{- if .hostNetwork }}
hostNetwork: true
{{- end }}
{{- end }}

{{/* A GPUDirect module's container settings (gds, gdrcopy): no args, which
NVIDIA's operator does not pass either. */}}
{{- define "gpu-operator.gpuDirect" -}}
enabled: true
{{- with .repository }}
repository: {{ . | quote }}
{{- end }}
{{- with .image }}
image: {{ . | quote }}
{{- end }}
{{- with .version }}
version: {{ . | quote }}
{{- end }}
{{- with .imagePullPolicy }}
imagePullPolicy: {{ . }}
{{- end }}
{{- with .imagePullSecrets }}
imagePullSecrets: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .env }}
env: {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* The pod security context shared by the operator and its hooks. */}}
{{- define "gpu-operator.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/* The container security context shared by the operator and its hooks. */}}
{{- define "gpu-operator.securityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
{{- end }}
