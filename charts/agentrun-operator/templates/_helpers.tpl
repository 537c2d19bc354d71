{{/* Names and labels shared by every template. */}}

{{- define "agentrun-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "agentrun-operator.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "agentrun-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "agentrun-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "agentrun-operator.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "agentrun-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: agentrun
{{- end }}

{{- define "agentrun-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "agentrun-operator.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* Namespaces the operator watches when it is not cluster-wide, as a JSON list. */}}
{{- define "agentrun-operator.watchNamespaces" -}}
{{- if .Values.watchNamespaces }}
{{- toJson .Values.watchNamespaces }}
{{- else }}
{{- toJson (list .Release.Namespace) }}
{{- end }}
{{- end }}

{{/* The Secret holding the store URL under key `url`, after checking the store settings. */}}
{{- define "agentrun-operator.storeSecret" -}}
{{- if and .Values.redis.enabled .Values.store.url }}
{{- fail "set either store.url or redis.enabled, not both" }}
{{- end }}
{{- if or .Values.redis.enabled .Values.store.url }}
{{- printf "%s-store" (include "agentrun-operator.fullname" .) }}
{{- else }}
{{- required "set store.existingSecret, store.url or redis.enabled=true" .Values.store.existingSecret }}
{{- end }}
{{- end }}
