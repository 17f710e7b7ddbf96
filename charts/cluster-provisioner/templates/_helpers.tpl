{{/* The labels of every object of the release. */}}
{{- define "cluster-provisioner.labels" -}}
app.kubernetes.io/name: cluster-provisioner
app.kubernetes.io/part-of: kubeopera
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The service's pods (not the migration Job's). */}}
{{- define "cluster-provisioner.selector" -}}
app.kubernetes.io/name: cluster-provisioner
app.kubernetes.io/component: server
{{- end }}

{{/* The one image of the service, its migrations and its Jobs. */}}
{{- define "cluster-provisioner.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* The restricted Pod Security container context both the service and the migration Job run with. */}}
{{- define "cluster-provisioner.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: [ALL]
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{- define "cluster-provisioner.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
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
