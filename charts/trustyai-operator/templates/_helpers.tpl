{{- define "trustyai-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "trustyai-operator.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else if contains (include "trustyai-operator.name" .) .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name (include "trustyai-operator.name" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{- define "trustyai-operator.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{ include "trustyai-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "trustyai-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "trustyai-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The operator's ServiceAccount: the chart's, or with serviceAccount.create=false an existing one. */}}
{{- define "trustyai-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{ .Values.serviceAccount.name | default (include "trustyai-operator.fullname" .) }}
{{- else -}}
{{ required "serviceAccount.name is required with serviceAccount.create=false: the name of an existing ServiceAccount in the release namespace" .Values.serviceAccount.name }}
{{- end -}}
{{- end }}

{{/* The operator image: the operator's pods and the `helm test` pod run it. */}}
{{- define "trustyai-operator.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{- define "trustyai-operator.proxyClusterRole" -}}
{{ include "trustyai-operator.fullname" . }}-proxy
{{- end }}

{{- define "trustyai-operator.webhookService" -}}
{{ include "trustyai-operator.fullname" . }}-webhook
{{- end }}

{{- define "trustyai-operator.certSecret" -}}
{{- if eq .Values.certs.mode "existingSecret" -}}
{{ required "certs.existingSecret is required with certs.mode=existingSecret" .Values.certs.existingSecret }}
{{- else -}}
{{ include "trustyai-operator.fullname" . }}-webhook-tls
{{- end -}}
{{- end }}

{{- define "trustyai-operator.certMode" -}}
{{- $modes := dict "selfSigned" "self-signed" "certManager" "cert-manager" "openshift" "openshift" "existingSecret" "files" -}}
{{- required (printf "certs.mode must be one of selfSigned, certManager, openshift, existingSecret, not %q" .Values.certs.mode) (get $modes .Values.certs.mode) -}}
{{- end }}

{{/* Annotations that make cert-manager's cainjector or OpenShift's service-ca fill caBundles. */}}
{{- define "trustyai-operator.caInjection" -}}
{{- if eq .Values.certs.mode "certManager" }}
cert-manager.io/inject-ca-from: {{ .Release.Namespace }}/{{ include "trustyai-operator.fullname" . }}-webhook
{{- else if eq .Values.certs.mode "openshift" }}
service.beta.openshift.io/inject-cabundle: "true"
{{- end }}
{{- end }}
