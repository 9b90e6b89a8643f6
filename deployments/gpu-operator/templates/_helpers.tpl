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

{{/* The operator image reference. */}}
{{- define "gpu-operator.image" -}}
{{- $tag := .Values.operator.version | default (printf "v%s" .Chart.AppVersion) -}}
{{- printf "%s/%s:%s" .Values.operator.repository .Values.operator.image $tag -}}
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
