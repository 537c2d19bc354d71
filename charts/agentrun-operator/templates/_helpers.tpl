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

{{/* The operator's pods, and only them: the chart's Redis carries component redis. */}}
{{- define "agentrun-operator.operatorSelectorLabels" -}}
{{ include "agentrun-operator.selectorLabels" . }}
app.kubernetes.io/component: operator
{{- end }}

{{/* The console's pods, and only them. */}}
{{- define "agentrun-operator.consoleSelectorLabels" -}}
{{ include "agentrun-operator.selectorLabels" . }}
app.kubernetes.io/component: console
{{- end }}

{{- define "agentrun-operator.consoleName" -}}
{{- printf "%s-console" (include "agentrun-operator.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The one namespace the console watches (--namespace), or "" for every namespace: it watches what
the operator watches. Its RBAC follows, so a namespaced install lets it list runs in that
namespace only; the console takes a single --namespace, so a namespaced install watching more
than one is refused rather than given a console whose every listing is refused.
*/}}
{{- define "agentrun-operator.consoleNamespace" -}}
{{- if not .Values.rbac.clusterWide }}
{{- $namespaces := include "agentrun-operator.watchNamespaces" . | fromJsonArray }}
{{- if ne (len $namespaces) 1 }}
{{- fail (printf "console.enabled with rbac.clusterWide=false: the console watches one namespace (python -m agentrun.console --namespace), and watchNamespaces lists %d (%s). List one namespace, or set rbac.clusterWide=true" (len $namespaces) (join ", " $namespaces)) }}
{{- end }}
{{- first $namespaces }}
{{- end }}
{{- end }}

{{/*
Fails rendering on console values the console cannot honour: the oauth2-proxy sidecar without
proxy sign-in (the console would ask for tokens behind a proxy that already signed people in).
*/}}
{{- define "agentrun-operator.checkConsole" -}}
{{- $console := .Values.console }}
{{- if and $console.oauth2Proxy.enabled (ne $console.auth.mode "proxy") }}
{{- fail (printf "console.oauth2Proxy.enabled needs console.auth.mode=proxy (it is %s): the sidecar signs people in and names them to the console in headers, which the console reads in proxy mode only" $console.auth.mode) }}
{{- end }}
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

{{/*
Fails rendering when a cluster-scoped object this release would create already exists and is not
this release's (another release's, or applied outside Helm), naming every such object and the
value that creates it: Helm's own refusal names no value to change. lookup answers nothing under
`helm template`, so this holds for install and upgrade.
*/}}
{{- define "agentrun-operator.checkClusterObjects" -}}
{{- $wanted := list }}
{{- if .Values.crds.enabled }}
{{- range list "agentruns.agentrun.dev" "agents.agentrun.dev" "runquotas.agentrun.dev" }}
{{- $wanted = append $wanted (list "crds.enabled" "apiextensions.k8s.io/v1" "CustomResourceDefinition" .) }}
{{- end }}
{{- end }}
{{- if .Values.accessControl.decisionPolicy }}
{{- range list "ValidatingAdmissionPolicy" "ValidatingAdmissionPolicyBinding" }}
{{- $wanted = append $wanted (list "accessControl.decisionPolicy" "admissionregistration.k8s.io/v1" . "agentrun-decisions") }}
{{- end }}
{{- end }}
{{- if .Values.accessControl.agentSecretsPolicy }}
{{- range list "ValidatingAdmissionPolicy" "ValidatingAdmissionPolicyBinding" }}
{{- $wanted = append $wanted (list "accessControl.agentSecretsPolicy" "admissionregistration.k8s.io/v1" . "agentrun-agent-secrets") }}
{{- end }}
{{- end }}
{{- if .Values.accessControl.userRoles }}
{{- range list "agentrun-view" "agentrun-edit" "agentrun-approve" }}
{{- $wanted = append $wanted (list "accessControl.userRoles" "rbac.authorization.k8s.io/v1" "ClusterRole" .) }}
{{- end }}
{{- end }}
{{- $taken := list }}
{{- range $wanted }}
{{- $found := lookup (index . 1) (index . 2) "" (index . 3) }}
{{- if $found }}
{{- $annotations := dig "metadata" "annotations" (dict) $found }}
{{- $release := index $annotations "meta.helm.sh/release-name" | default "" }}
{{- $namespace := index $annotations "meta.helm.sh/release-namespace" | default "" }}
{{- if not (and (eq $release $.Release.Name) (eq $namespace $.Release.Namespace)) }}
{{- $adopt := printf "applied outside Helm; for this release to manage it: kubectl annotate %s %s meta.helm.sh/release-name=%s meta.helm.sh/release-namespace=%s && kubectl label %s %s app.kubernetes.io/managed-by=Helm" (index . 2 | lower) (index . 3) $.Release.Name $.Release.Namespace (index . 2 | lower) (index . 3) }}
{{- $owner := ternary $adopt (printf "release %s in namespace %s" $release $namespace) (eq $release "") }}
{{- $taken = append $taken (printf "%s=true: %s %s already exists (%s)" (index . 0) (index . 2) (index . 3) $owner) }}
{{- end }}
{{- end }}
{{- end }}
{{- if $taken }}
{{- fail (printf "%s. A cluster holds one of each: a second release of this chart sets crds.enabled=false, accessControl.decisionPolicy=false, accessControl.agentSecretsPolicy=false and accessControl.userRoles=false (and a controllerName of its own if its namespaces overlap the other's)" (join "; " $taken)) }}
{{- end }}
{{- end }}

{{/*
Fails rendering when another release whose operator claims runs under the same controller name
watches a namespace this one watches: two installs on one run would both execute it, and their
stores fence separately, so only distinct controller names keep them apart. Each other release is
read from its operator Deployment (lookup; nothing under `helm template`).
*/}}
{{- define "agentrun-operator.checkControllerName" -}}
{{- $name := .Values.controllerName }}
{{- $mine := ternary (list "*") (include "agentrun-operator.watchNamespaces" . | fromJsonArray) .Values.rbac.clusterWide }}
{{- $deployments := lookup "apps/v1" "Deployment" "" "" }}
{{- range (dig "items" (list) $deployments) }}
{{- $labels := dig "metadata" "labels" (dict) . }}
{{- $operator := and (eq (index $labels "app.kubernetes.io/part-of" | default "") "agentrun") (eq (index $labels "app.kubernetes.io/component" | default "") "operator") }}
{{- $self := and (eq (index $labels "app.kubernetes.io/instance" | default "") $.Release.Name) (eq .metadata.namespace $.Release.Namespace) }}
{{- if and $operator (not $self) }}
{{- $theirNamespace := .metadata.namespace }}
{{- range (dig "spec" "template" "spec" "containers" (list) .) }}
{{- if eq .name "operator" }}
{{- $theirName := "" }}
{{- range (.env | default list) }}
{{- if eq .name "AGENTRUN_CONTROLLER_NAME" }}{{ $theirName = .value | default "" }}{{ end }}
{{- end }}
{{- $theirs := list }}
{{- range (.args | default list) }}
{{- if eq . "--all-namespaces" }}{{ $theirs = append $theirs "*" }}{{ end }}
{{- if hasPrefix "--namespace=" . }}{{ $theirs = append $theirs (trimPrefix "--namespace=" .) }}{{ end }}
{{- end }}
{{- $overlap := or (has "*" $mine) (has "*" $theirs) }}
{{- range $mine }}{{ if has . $theirs }}{{ $overlap = true }}{{ end }}{{ end }}
{{- if and (eq $theirName $name) $overlap }}
{{- fail (printf "controllerName %q is already used by release %s in namespace %s, which watches %s; this release would watch %s. Two installs that watch a namespace in common must use different controller names: set controllerName to another value (say agentrun.dev/%s)" $name (index $labels "app.kubernetes.io/instance") $theirNamespace (join ", " $theirs | replace "*" "every namespace") (join ", " $mine | replace "*" "every namespace") $.Release.Name) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/* An address or CIDR as a NetworkPolicy ipBlock takes it: an address alone is its /32 or /128. */}}
{{- define "agentrun-operator.cidr" -}}
{{- if contains "/" . }}{{ . }}{{ else if contains ":" . }}{{ . }}/128{{ else }}{{ . }}/32{{ end }}
{{- end }}
