{{/* The chart's name, the `app.kubernetes.io/name` label (nameOverride). */}}
{{- define "cluster-provisioner.name" -}}
{{- .Values.nameOverride | default .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The objects' name and their names' prefix: not derived from the release's name, so that each install keeps
the names it always had (cluster-provisioner); fullnameOverride, else nameOverride, changes it. */}}
{{- define "cluster-provisioner.fullname" -}}
{{- .Values.fullnameOverride | default (include "cluster-provisioner.name" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The labels of every object of the release. */}}
{{- define "cluster-provisioner.labels" -}}
app.kubernetes.io/name: {{ include "cluster-provisioner.name" . }}
app.kubernetes.io/part-of: kubeopera
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The service's pods (not the migration Job's). */}}
{{- define "cluster-provisioner.selector" -}}
app.kubernetes.io/name: {{ include "cluster-provisioner.name" . }}
app.kubernetes.io/component: server
{{- end }}

{{/* The one image of the service, its migrations and its Jobs. */}}
{{- define "cluster-provisioner.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* The pod-level settings the service's pods and the migration Job's share: the operator's pull Secrets (names
or {name: ...}), priority and scheduling. */}}
{{- define "cluster-provisioner.podPlacement" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- range . }}
  - name: {{ if kindIs "string" . }}{{ . }}{{ else }}{{ .name }}{{ end }}
  {{- end }}
{{- end }}
{{- with .Values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* The egress rule to the OpenTelemetry collector, when traces are on (an item of a NetworkPolicy's `egress`). */}}
{{- define "cluster-provisioner.tracesEgress" -}}
{{- with .Values.traces }}
{{- if and .endpoint (or .namespace .cidrs) }}
- to:
    {{- if .namespace }}
    - namespaceSelector:
        matchLabels:
          kubernetes.io/metadata.name: {{ .namespace }}
    {{- end }}
    {{- range .cidrs }}
    - ipBlock:
        cidr: {{ . }}
    {{- end }}
  ports:
    - protocol: TCP
      port: {{ .port }}
{{- end }}
{{- end }}
{{- end }}
